"""Handoffs within one stead run: the agents an agent can hand off to, journaled alike.

The SDK's ``Runner`` switches its current agent when a reply calls a handoff tool
(``transfer_to_billing``): the rest of the run asks that agent's model, with that agent's
tools. Under stead every agent reachable by handoff is copied as the first one is (its model
journaled, its function tools handing each call to the journal), and each handoff leads to
the copy of its target, so a replay after a crash reads the recorded replies, takes the same
handoff again and goes on with the agent that had been handed to, its tools recovered by the
effect classes given for them (one set for the whole run, from ``@effect`` or the mapping).

The handoff call itself is a recorded ``read_only`` call of the run whose result is the SDK's
transfer message (``{"assistant": "billing"}``). The first handoff of a reply is the one the
SDK takes: the run loop performs its call as the SDK's own ``on_invoke_handoff`` (the
handoff's input checked, its ``on_handoff`` callback run), and the SDK's invocation reads
the recorded result, so a resumed run that finds it in the log goes on with the agent handed
to without running ``on_handoff`` again; one in flight at a crash (no result recorded) runs
it again, as a ``read_only`` call. The others of the reply
are answered from the log alone with what the SDK answers them ("Multiple handoffs
detected, ignoring this one."). A handoff's ``input_filter`` (or the run config's) is run on
every drive: it builds the conversation each later request of the agent handed to carries,
including the first one the log has not recorded yet, so it cannot be replayed from the log;
keep it a function of its input.
"""

from __future__ import annotations

import dataclasses
import json
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from agents import Agent as SdkAgent
from agents import Handoff, handoff
from agents.exceptions import ModelBehaviorError
from agents.run_context import RunContextWrapper

from stead.core.effects import ToolFailed, ToolSucceeded
from stead.errors import UserError
from stead.foreign import Journal, current_journal
from stead.openai_agents._model import same_json
from stead.tools import SchemaTool, Tool, ToolContext

Graph = Sequence[tuple[SdkAgent[Any], Sequence[tuple[Handoff[Any, Any], SdkAgent[Any]]]]]
"""Every agent reachable by handoff from the first (first), with its handoffs and targets."""

IGNORED = "Multiple handoffs detected, ignoring this one."
"""What the SDK answers a reply's second and later handoff calls (it takes the first)."""


def reachable(start: SdkAgent[Any], label: str) -> Graph:
    """``start`` and every agent reachable from it by handoff, each once, in the order met."""
    out: list[tuple[SdkAgent[Any], list[tuple[Handoff[Any, Any], SdkAgent[Any]]]]] = []
    seen: set[int] = set()
    todo = [start]
    while todo:
        agent = todo.pop(0)
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        edges: list[tuple[Handoff[Any, Any], SdkAgent[Any]]] = []
        for item in agent.handoffs:
            h = handoff(item) if isinstance(item, SdkAgent) else item
            ref = h._agent_ref  # set by handoff(); the one way to know a handoff's target
            target = ref() if ref is not None else None
            if not isinstance(target, SdkAgent):
                raise UserError(
                    f"Agents SDK agent {label!r}: the handoff {h.tool_name!r} of "
                    f"{agent.name!r} names no agent stead can copy; give handoffs as agents "
                    "or as handoff(agent, ...)"
                )
            edges.append((h, target))
            todo.append(target)
        out.append((agent, edges))
    return out


def journaled_graph(graph: Graph, copy: Callable[[SdkAgent[Any]], SdkAgent[Any]]) -> SdkAgent[Any]:
    """The first agent's copy, each handoff of each copy leading to its target's copy."""
    copies = {id(agent): copy(agent) for agent, _ in graph}
    names = frozenset(h.tool_name for _, edges in graph for h, _ in edges)
    for agent, edges in graph:
        copies[id(agent)].handoffs = [_to_copy(h, copies[id(t)], names) for h, t in edges]
    return copies[id(graph[0][0])]


def first_handoff(journal: Journal, turn: int, names: frozenset[str]) -> str | None:
    """The call id of turn ``turn``'s first handoff call: the one the SDK takes."""
    for r in journal.requested.values():
        if r.turn_index == turn and r.name in names:
            return r.tool_call_id
    return None


def _to_copy(
    h: Handoff[Any, Any], target: SdkAgent[Any], names: frozenset[str]
) -> Handoff[Any, Any]:
    invoke = h.on_invoke_handoff
    message = h.get_transfer_message(target)

    async def on_invoke(ctx: RunContextWrapper[Any], arguments: str) -> Any:
        journal = current_journal()
        # The SDK gives on_invoke_handoff no call id; it invokes the reply's first handoff,
        # which is the first handoff call of the turn it asked for last.
        call_id = None if journal is None else first_handoff(journal, journal.asked - 1, names)
        if journal is None or call_id is None:
            await invoke(ctx, arguments)
            return target
        # The run loop performs the call (``_handoff_tool``); this reads what it recorded.
        recorded = await journal.tool(
            call_id,
            h.tool_name,
            lambda rec: same_json(rec, arguments),
            lambda: invoked(h, arguments, message),
        )
        if recorded.is_error:  # the SDK ends a run whose handoff it could not invoke
            raise ModelBehaviorError(recorded.content)
        return target

    out = dataclasses.replace(h, on_invoke_handoff=on_invoke)
    out._agent_ref = weakref.ref(target)
    return out


async def invoked(h: Handoff[Any, Any], arguments: str, message: str) -> ToolSucceeded | ToolFailed:
    """The SDK's invocation of a handoff (its input checked, its ``on_handoff`` run) as the
    outcome of its call: the transfer message, or the failure the SDK would end the run
    with. Its context is a fresh one with no user context, as a stead run's is (``durable``
    gives the ``Runner`` none)."""
    try:
        await h.on_invoke_handoff(RunContextWrapper(context=None), arguments)
    except Exception as exc:
        return ToolFailed(failure=f"{type(exc).__name__}: {exc}")
    return ToolSucceeded(content=message)


def handoff_tools(graph: Graph, function_tools: set[str]) -> list[Tool[..., Any]]:
    """The handoff calls as the run's tools, one per tool name."""
    found: dict[str, tuple[Handoff[Any, Any], SdkAgent[Any]]] = {}
    for agent, edges in graph:
        for h, target in edges:
            name = h.tool_name
            if name in function_tools:
                raise UserError(
                    f"Agents SDK agent {agent.name!r}: its handoff {name!r} has the name of a "
                    "function tool; name them apart"
                )
            known = found.get(name)
            if known is not None and known[1].name != target.name:
                raise UserError(
                    f"Agents SDK agent {agent.name!r}: the handoff {name!r} leads to "
                    f"{target.name!r} here and to {known[1].name!r} elsewhere; name them apart"
                )
            found.setdefault(name, (h, target))
    names = frozenset(found)
    return [_handoff_tool(h, h.get_transfer_message(t), names) for h, t in found.values()]


def _handoff_tool(h: Handoff[Any, Any], message: str, names: frozenset[str]) -> Tool[..., Any]:
    async def perform(values: dict[str, Any], ctx: ToolContext) -> ToolSucceeded | ToolFailed:
        journal = current_journal()
        if journal is None:
            return ToolSucceeded(content=message)
        if first_handoff(journal, ctx.turn_index, names) != ctx.tool_call_id:
            return ToolSucceeded(content=IGNORED)  # the SDK never invokes it
        # The one the SDK takes, performed here rather than waiting for the SDK to invoke it:
        # the SDK invokes a handoff only after the reply's other calls, and one of those may
        # wait for a person, whom this turn's calls must not wait behind.
        return await invoked(h, json.dumps(values), message)

    return SchemaTool(
        h.tool_name,
        h.input_json_schema,
        perform,
        description=h.tool_description,
        effect="read_only",
        what=f"the handoff {h.tool_name!r}",
    )
