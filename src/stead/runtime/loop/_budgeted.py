"""The budget check before a model call: what the call may cost, estimated from its request,
against what the run may still spend (``Agent.budget``)."""

from __future__ import annotations

from stead.core.budget import budget_breach, estimate_tokens
from stead.core.builders import run_failed_event
from stead.core.children import link_of, tree_budget_of
from stead.core.events import Event
from stead.core.fold import RunState
from stead.core.messages import AssistantMessage, Message, Usage
from stead.errors import RunNotFound
from stead.providers import ModelRequest
from stead.runtime.agent import Agent
from stead.runtime.loop._children import children_of
from stead.runtime.loop._owned import OwnedRun
from stead.store import Store

DEFAULT_MAX_OUTPUT_TOKENS = 4096
"""What a turn may generate when the agent sets no cap (used to estimate its cost)."""


def _chars(m: Message) -> int:
    if isinstance(m, AssistantMessage):
        return len(m.text) + sum(len(c.arguments) + len(c.name) + 16 for c in m.tool_calls)
    return len(m.content) + 8


def over_budget(
    agent: Agent,
    state: RunState,
    fixed_chars: int,
    request: ModelRequest,
    below: Usage | None = None,
    rest: Usage | None = None,
) -> Event | None:
    """The ``run_failed`` that ends the run before ``request`` is sent, if the call may take it
    over its budget; None when it may go (``fixed_chars``: the system prompt and the tool
    schemas, the same for every turn). ``below``: what the run's child runs (and theirs)
    used, which counts against its budget as its own does; a child is held to its tree's
    budget as well (``stead.core.children``): against ``rest``, what the rest of the tree
    has spent by now, where it was read, else what it had spent when the child started."""
    tree = tree_budget_of(state)
    if agent.budget.unlimited and tree is None:
        return None
    prompt = estimate_tokens(fixed_chars + sum(_chars(m) for m in request.messages))
    out = request.max_output_tokens or DEFAULT_MAX_OUTPUT_TOKENS
    price = agent.prices.get(request.model)
    spent = state.usage if below is None else state.usage + below
    breach = budget_breach(spent, prompt, out, agent.budget, price)
    if breach is None and tree is not None:
        budget, before = tree
        whole = before + spent if rest is None else rest + state.usage
        breach = budget_breach(whole, prompt, out, budget, price)
        if breach is not None:
            message = f"the budget of the tree of runs under {_root(state)}: {breach.message}"
            details = {**breach.details, "tree_root": _root(state)}
            return run_failed_event(state, "budget_exceeded", "model", message, details)
    if breach is None:
        return None
    return run_failed_event(state, "budget_exceeded", "model", breach.message, breach.details)


def _root(state: RunState) -> str:
    link = link_of(state.config)
    return state.run_id if link is None else link.root


def in_tree(agent: Agent, state: RunState) -> bool:
    """Whether a run counts its descendants' usage against its budget: a child, or a
    parent that can start one (with an ``agent_tool``, or with a budget a handler's
    ``run_child`` may spend of); a child is held to its tree's budget too."""
    return agent._parts.children or not agent.budget.unlimited or tree_budget_of(state) is not None


async def rest_of_tree(store: Store, state: RunState) -> Usage | None:
    """What every other run of ``state``'s tree has spent by now (its root, its siblings,
    theirs, its own children): read at each turn of a child held to its tree's budget, so
    children working side by side see each other's spending (the snapshot its link took
    when it started cannot). None for a run outside a budgeted tree."""
    link = link_of(state.config)
    if link is None or link.budget is None:
        return None
    total = Usage()
    todo = [link.root]
    while todo:
        run_id = todo.pop()
        if run_id != state.run_id:
            try:
                run, _ = await OwnedRun.load_state(store, run_id)
            except RunNotFound:
                continue
            total = total + run.usage
        todo.extend(await children_of(store, run_id))
    return total
