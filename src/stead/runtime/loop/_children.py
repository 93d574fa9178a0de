"""Child runs, the acting side (the deciding is ``stead.core.children``): start a call's
child and record the wait, give a finished child's end to its parent, and count a tree's
usage.

The order makes a crash anywhere safe. The child is created first, under the id derived
from the call, then the parent's wait is recorded: a crash between the two leaves the call
planned again, which finds the child already there (``Conflict`` is that news) and records
the wait. After the wait is committed the child is looked at once more: a child that
finished before the wait existed found no one to tell, so the parent takes its result now.
A child that finishes later gives it to the parent itself (``settle_parent``, at the end of
its drive, its cancel or its timeout); a process that died in between leaves it to a
worker's sweep (``Runtime.expire_approvals``), which calls the same function. Whichever
comes first writes the result; the others find nothing waiting and write nothing.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stead._crash import CrashHook
from stead.core.builders import created_event, executed_result
from stead.core.children import (
    PARENT_KEY,
    child_link,
    child_result,
    child_run_id,
    child_settled_events,
    child_wait_events,
    depth_refusal,
    link_of,
    waiting_children,
)
from stead.core.events import ApprovalRequested
from stead.core.fold import CallState, RunState
from stead.core.messages import Usage
from stead.core.states import FINISHED
from stead.errors import ChildRunFailed, Conflict, RunNotFound, UserError
from stead.runtime.agent import Agent, ChildTool, RunView
from stead.runtime.loop._owned import OwnedRun
from stead.store import Store
from stead.tools import ChildPending, ToolContext

log = logging.getLogger("stead.runtime")


async def start_child(
    owned: OwnedRun,
    agent: Agent,
    call: CallState,
    clock: Callable[[], float],
    crash: CrashHook,
) -> None:
    """Start (or find) ``call``'s child run and record that the call waits on it."""
    state = owned.state
    tool = agent.registry.get(call.name)
    if not isinstance(tool, ChildTool):
        why = f"tool {call.name!r} does not start a child run in this worker"
        await owned.append([executed_result(call, why, True, call.attempts + 1)])
        return
    refused = depth_refusal(state, agent.limits.max_depth)
    if refused is not None:
        await owned.append([executed_result(call, refused, True, call.attempts + 1)])
        return
    text = tool.child_input(call.effective_arguments())
    await open_child(owned, agent, call, tool.agent.name, text, None, clock, crash)


async def open_child(
    owned: OwnedRun,
    agent: Agent,
    call: CallState,
    child_agent: str,
    text: str,
    index: int | None,
    clock: Callable[[], float],
    crash: CrashHook,
) -> None:
    """Create ``call``'s child (``index``: its place among a handler's children, None for
    an ``agent_tool`` call) unless it exists, record the wait, and take the result of a
    child that ended before the wait was there."""
    state, store = owned.state, owned.store
    child_id = child_run_id(state.run_id, call.tool_call_id, index)
    budgeted = not agent.budget.unlimited or link_of(state.config) is not None
    spent = await descendants_usage(store, state.run_id) if budgeted else Usage()
    link = child_link(state, call, agent.budget, spent, index)
    created = created_event(
        child_id,
        child_agent,
        text,
        session_id=state.session_id,
        correlation_id=state.correlation_id,
        config={PARENT_KEY: link.to_json()},
    )
    with contextlib.suppress(Conflict):  # created before a crash: this is the same child
        await store.create_run(created, now=clock())
    crash("after_child_created", call.name)
    token = secrets.token_urlsafe(16)
    await owned.append(child_wait_events(call, child_id, child_agent, text, token, index))
    child, _ = await OwnedRun.load_state(store, child_id)
    if child.status in FINISHED:  # it ended before the wait was there to be told
        await owned.append(lambda s: child_settled_events(s, child))


@dataclass(slots=True)
class _Started:
    """The children one execution of a handler asked for so far."""

    count: int = 0
    pending: tuple[int, Agent, str] | None = None
    """The child it waits on (index, agent, input), set when ``run_child`` stopped it."""


class HandlerChildren:
    """The run loop's side of ``ToolContext.run_child`` for one drive (``ChildPort``).

    A handler's ``run_child`` reads the child recorded under its call and place: one that
    ended gives its result; otherwise the handler is stopped and the loop, seeing the note
    left here (``take``), starts the child and records the wait (``open_child``). Whatever
    the handler did with ``ChildPending``, the note decides: the call waits."""

    __slots__ = ("agent", "calls", "clock", "crash", "owned", "register", "run_id")

    def __init__(
        self,
        owned: OwnedRun,
        agent: Agent,
        register: Callable[[Agent], None],
        clock: Callable[[], float],
        crash: CrashHook,
    ) -> None:
        self.owned, self.agent, self.clock, self.crash = owned, agent, clock, crash
        self.run_id = owned.state.run_id
        self.register = register
        """Makes the child's agent known to this process, so its ``run`` can drive it."""
        self.calls: dict[str, _Started] = {}

    async def waits(self, call: CallState) -> bool:
        """After one execution of ``call``'s handler: start the child it stopped to wait on
        and record the wait (True), or False when it asked for none still running. The
        count starts again: the next execution asks for the same children."""
        started = self.calls.pop(call.tool_call_id, None)
        if started is None or started.pending is None:
            return False
        index, child, text = started.pending
        await open_child(
            self.owned, self.agent, call, child.name, text, index, self.clock, self.crash
        )
        return True

    async def run_child(self, ctx: ToolContext, agent: Any, input: str) -> Any:
        if not isinstance(agent, Agent):
            raise UserError(f"run_child takes a stead.Agent, not {type(agent).__name__}")
        if not isinstance(input, str):
            raise UserError(
                f"run_child takes the child's input as text, not {type(input).__name__}"
            )
        started = self.calls.setdefault(ctx.tool_call_id, _Started())
        if started.pending is not None:
            raise UserError(
                "run_child: this handler already waits on a child; start its children one "
                "after another (for children that work at once, give the model several "
                "stead.agent_tool calls in one turn)"
            )
        index = started.count
        started.count += 1
        self.register(agent)
        child_id = child_run_id(self.run_id, ctx.tool_call_id, index)
        try:
            child, _ = await OwnedRun.load_state(self.owned.store, child_id)
        except RunNotFound:
            child = None
        if child is not None and child.agent != agent.name:
            raise UserError(
                f"run_child: child {index} of call {ctx.tool_call_id} is a run of agent "
                f"{child.agent!r}, and the handler now asks for {agent.name!r}; a handler must "
                "start the same children in the same order every time it runs"
            )
        if child is not None and child.status in FINISHED:
            return _result(child, agent)
        refused = depth_refusal(self.owned.state, self.agent.limits.max_depth)
        if child is None and refused is not None:
            raise UserError(refused)
        started.pending = (index, agent, input)
        raise ChildPending(
            f"call {ctx.tool_call_id} waits on its child run {child_id} ({agent.name}); "
            "its handler runs again when that run ends"
        )


def _result(child: RunState, agent: Agent) -> Any:
    """A finished child's result as ``run_child`` returns it, or ``ChildRunFailed``."""
    settled = child_result(child)
    assert settled is not None
    content, is_error = settled
    if is_error:
        raise ChildRunFailed(child.run_id, content)
    view = RunView.of(child, {agent.name: agent})
    return view.data if view.data is not None else content


async def settle_parent(
    store: Store,
    child: RunState,
    *,
    clock: Callable[[], float],
    owner: str = "",
    snapshot_every: int = 256,
) -> bool:
    """Give a finished child's end to the parent call waiting on it; True when this wrote
    it (False: not a child, not finished, or the parent no longer waits on it)."""
    link = link_of(child.config)
    if link is None or child.status not in FINISHED:
        return False
    try:
        owned = await OwnedRun.steering(
            store, link.run_id, clock=clock, owner=owner, snapshot_every=snapshot_every
        )
    except RunNotFound:
        log.warning("run %s: its parent %s is not in this store", child.run_id, link.run_id)
        return False
    before = owned.state.seq
    after = await owned.append(lambda s: child_settled_events(s, child), automatic=False)
    return after.seq != before


async def settle_waits(
    store: Store,
    parent: RunState,
    *,
    clock: Callable[[], float],
    owner: str = "",
    snapshot_every: int = 256,
) -> bool:
    """The sweep's half: for each call of ``parent`` waiting on a child that has finished,
    take the child's result (a delivery lost to a crash). True when one was taken."""
    taken = False
    for child_id in waiting_children(parent).values():
        try:
            child, _ = await OwnedRun.load_state(store, child_id)
        except RunNotFound:
            continue  # the wait was recorded before a create that never happened: see below
        if child.status in FINISHED:
            settled = await settle_parent(
                store, child, clock=clock, owner=owner, snapshot_every=snapshot_every
            )
            taken = settled or taken
    return taken


async def children_of(store: Store, run_id: str) -> list[str]:
    """Every child run a run started, in the order its calls started them."""
    out: list[str] = []
    for stored in await store.read_events(run_id, 0):
        e = stored.event
        if isinstance(e, ApprovalRequested) and e.reason == "child":
            child = (e.payload or {}).get("child_run")
            if isinstance(child, str) and child not in out:
                out.append(child)
    return out


async def descendants_usage(store: Store, run_id: str) -> Usage:
    """What all the runs below a run (its children, theirs, ...) have used."""
    total = Usage()
    for child_id in await children_of(store, run_id):
        try:
            child, _ = await OwnedRun.load_state(store, child_id)
        except RunNotFound:
            continue
        total = total + child.usage + await descendants_usage(store, child_id)
    return total
