"""Steering a run from any process: a person's decision, a cancel, a requeue, the passing
of an approval deadline. Each is validated against the run's current state and appended
through ``OwnedRun`` like the owner's own events; none of them drives the run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, get_args

from stead._crash import CrashHook
from stead.core.builders import (
    cancel_events,
    cancel_request_event,
    decision_events,
    requeue_event,
    timeout_events,
    wait_credit_events,
)
from stead.core.canonical import canonical_json
from stead.core.children import PARENT_KEY, waiting_children
from stead.core.events import (
    Decision,
    Event,
)
from stead.core.fold import RunState, apply
from stead.core.states import FINISHED, RESUMABLE, RunStatus
from stead.errors import (
    ApprovalError,
    UserError,
)
from stead.runtime.agent import Agent, RunView, checks, takes_id_prefix
from stead.runtime.loop import (
    OwnedRun,
    children_of,
    dead_local_owner,
    settle_parent,
    settle_waits,
)
from stead.store import RunRecord, Store

DECISIONS = tuple(d for d in get_args(Decision) if d != "answer")
"""What ``decide`` takes (a question's answer goes through ``answer``, which checks it)."""


def _arguments_text(arguments: object) -> str:
    """Edited arguments as the JSON text the tool validates: a JSON string as it is, or a
    dict (any value ``json`` cannot carry exactly is the caller's ``ApprovalError``)."""
    if isinstance(arguments, str):
        return checks.text("the edited arguments", arguments)
    if not isinstance(arguments, dict):
        raise ApprovalError(
            "edited arguments are a dict (or a JSON object as a str), not "
            f"{type(arguments).__name__}"
        )
    try:
        return canonical_json(arguments)
    except ValueError as exc:
        raise ApprovalError(
            "edited arguments must hold only JSON (str keys; str, int, finite float, bool, "
            f"None, list, dict values): {exc}"
        ) from None


def _with(state: RunState, event: Event) -> RunState:
    """``state`` with ``event`` applied, leaving ``state`` untouched."""
    probe = state.copy()
    apply(probe, event)
    return probe


class Steering:
    """``Runtime.decide``, ``cancel``, ``requeue`` and ``expire_approvals``."""

    store: Store
    agents: Mapping[str, Any]
    owner: str
    clock: Callable[[], float]
    snapshot_every: int
    _driving: set[str]
    _crash: CrashHook

    if TYPE_CHECKING:

        async def state(self, run_id: str) -> RunState: ...

        def _agent_for(self, state: RunState) -> Agent: ...

        def _lease(self, run_id: str, record: RunRecord) -> AbstractAsyncContextManager[int]: ...

    @takes_id_prefix
    async def decide(
        self,
        run_id: str,
        tool_call_id: str,
        decision: Decision,
        *,
        token: str | None = None,
        result: str | None = None,
        reason: str = "",
        arguments: Any = None,
        by: str = "",
    ) -> RunView:
        """Record a person's decision on a pending call (validated; nothing written if not).

        Edited ``arguments`` are validated against the tool's schema (this Runtime must know
        the run's agent for that). A decision after the approval's deadline is refused and the
        run moves to ``timed_out``. The run is not driven here: call ``run`` (or let a worker
        pick it up) to continue it.
        """
        checks.identifier("run_id", run_id)
        checks.identifier("tool_call_id", tool_call_id)
        if not isinstance(decision, str) or decision not in DECISIONS:
            raise UserError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
        checks.optional_text("token", token)
        checks.optional_text("result", result)
        checks.text("reason", reason)
        checks.text("by", by)
        edited: str | None = None
        if arguments is not None:
            raw = _arguments_text(arguments)
            state = await self.state(run_id)
            call = state.calls.get(tool_call_id)
            tool = self._agent_for(state).registry.get(call.name) if call else None
            if tool is None:
                raise ApprovalError(f"no pending call {tool_call_id!r} with a known tool")
            edited, problem = tool.validate(raw)
            if problem is not None:
                raise ApprovalError(f"the edited arguments do not fit the tool: {problem}")
        now = self.clock()
        timed_out = await self._append_external(run_id, lambda s: timeout_events(s, now))
        if timed_out.status is RunStatus.TIMED_OUT:
            why = (timed_out.error or {}).get("message", "")
            raise ApprovalError(
                f"run {run_id}: a deadline passed, so the run timed out ({why}); "
                "`stead resume` asks again"
            )
        said: dict[str, Any] = {"token": token, "by": by, "reason": reason, "result": result}

        def build(s: RunState) -> list[Event]:
            decided = decision_events(s, tool_call_id, decision, arguments=edited, now=now, **said)
            return decided + wait_credit_events(s, decided, now)

        state = await self._append_external(run_id, build)
        self._crash("after_approval_commit", None)
        return RunView.of(state, self.agents)

    async def approve(self, run_id: str, tool_call_id: str, **kw: Any) -> RunView:
        """Approve a policy-gated call (optionally with edited ``arguments``)."""
        return await self.decide(run_id, tool_call_id, "approve", **kw)

    async def deny(self, run_id: str, tool_call_id: str, reason: str, **kw: Any) -> RunView:
        """Deny a call; the model reads ``reason`` as an error result."""
        return await self.decide(run_id, tool_call_id, "deny", reason=reason, **kw)

    @takes_id_prefix
    async def cancel(self, run_id: str, reason: str = "cancelled", *, by: str = "") -> RunView:
        """Cancel a run from any process.

        With a live owner, the request is recorded and the owner (which watches for it)
        aborts the model stream and the tools, gives them ``Limits.cancel_grace`` seconds,
        closes every open call with a ``cancelled`` result and ends the run. Without one,
        this process takes the lease (fencing out any zombie) and does that itself.
        """
        checks.identifier("run_id", run_id)
        checks.text("reason", reason)
        checks.text("by", by)
        view = await self._cancel_one(run_id, reason, by)
        # Then its unfinished children, and theirs: the parent first, so a child's end
        # finds no wait to give its result to and wakes nobody.
        for child_id in await children_of(self.store, run_id):
            child = await self.store.get_run(child_id)
            if child.status not in FINISHED:
                await self.cancel(
                    child_id, f"its parent run {run_id} was cancelled: {reason}", by=by
                )
        return view

    async def _cancel_one(self, run_id: str, reason: str, by: str) -> RunView:
        record = await self.store.get_run(run_id)
        request = cancel_request_event(reason, by)
        if run_id in self._driving or self._live_owner(record):
            # A run this Runtime drives is cancelled by its own driver (which watches for the
            # request), even if its lease lapsed: claiming it here would fence that driver
            # out from under a tool it is running.
            state = await self._append_external(run_id, lambda s: [request])
            self._crash("after_cancel_commit", None)
            return RunView.of(state, self.agents)
        async with self._lease(run_id, record) as epoch:
            state = await self._append_external(
                run_id,
                lambda s: [request, *cancel_events(_with(s, request), reason)],
                epoch=epoch,
            )
        await self._settle_parent(state)
        return RunView.of(state, self.agents)

    async def _settle_parent(self, state: RunState) -> None:
        """A child that ended here (cancelled, timed out) gives its end to its parent."""
        if PARENT_KEY in state.config and state.status in FINISHED:
            await settle_parent(
                self.store,
                state,
                clock=self.clock,
                owner=self.owner,
                snapshot_every=self.snapshot_every,
            )

    def _live_owner(self, record: RunRecord) -> bool:
        return (
            record.lease_owner is not None
            and (record.lease_expires_at or 0) > self.clock()
            and not dead_local_owner(record.lease_owner)
        )

    async def expire_approvals(self) -> list[str]:
        """Move every run waiting on a person whose approval deadline (or whose own deadline,
        when waiting counts: ``Limits.duration_counts_waiting``) passed to ``timed_out``;
        returns their ids.

        Waiting runs have no worker; call this periodically (a worker does) so deadlines
        fire without anyone touching the run.
        """
        expired = []
        for record in await self.store.list_runs(status=RunStatus.AWAITING_APPROVAL, limit=10_000):
            state = await self.state(record.run_id)
            now = self.clock()
            if timeout_events(state, now):
                state = await self._append_external(
                    record.run_id, functools.partial(timeout_events, now=now)
                )
                expired.append(record.run_id)
                await self._settle_parent(state)
            elif waiting_children(state):  # a child's end its process died before giving
                await settle_waits(
                    self.store,
                    state,
                    clock=self.clock,
                    owner=self.owner,
                    snapshot_every=self.snapshot_every,
                )
        return expired

    async def _append_external(
        self,
        run_id: str,
        build: Callable[[RunState], list[Event]],
        *,
        epoch: int | None = None,
    ) -> RunState:
        """Append from outside the owning worker, through the same code the owner
        uses (``OwnedRun.steering``): validated against the current state, written at the
        current epoch (or ``epoch``, when this process holds the lease), rebuilt and tried
        again on a concurrent write. Returns the new state (unchanged if ``build`` gives
        nothing)."""
        owned = await OwnedRun.steering(
            self.store,
            run_id,
            clock=self.clock,
            epoch=epoch,
            owner=self.owner,
            snapshot_every=self.snapshot_every,
        )
        return await owned.append(build, automatic=False)

    @takes_id_prefix
    async def requeue(self, run_id: str, reason: str = "resumed") -> RunView:
        """``resume`` without driving: send a failed, cancelled or timed-out run back to
        ``queued`` for a worker to claim (a server must not drive runs in a request).

        A run whose worker crashed is already claimable once its lease lapses; it is left
        as it is. A completed run, or one waiting on a person, is refused.
        """
        state, _ = await OwnedRun.load_state(self.store, run_id)
        if state.status is RunStatus.COMPLETED:
            raise UserError(f"run {run_id} is completed; there is nothing to resume")
        if state.status is RunStatus.AWAITING_APPROVAL:
            raise UserError(f"run {run_id} waits on a person: approve or deny its pending calls")
        if state.status in RESUMABLE:
            state = await self._append_external(run_id, lambda s: [requeue_event(reason)])
        return RunView.of(state, self.agents)
