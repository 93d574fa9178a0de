"""``Runtime``: the facade a program uses to start, drive, inspect and steer runs.

One ``Runtime`` holds a store and the agents this process can drive. ``run`` claims the run's
lease (bumping its fencing epoch), drives it until it finishes or waits on a person, and
releases the lease. A process that finds a run whose owner died on this machine takes it over
at once; otherwise it waits for the lease to lapse.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from stead import _crash
from stead._signal import AbortSignal
from stead.core.builders import cancel_events, decision_events, timeout_events
from stead.core.canonical import canonical_json
from stead.core.decide import RunTools, next_step
from stead.core.events import (
    AssistantMessageRecorded,
    Decision,
    Event,
    RunCancelRequested,
    RunCreated,
    RunRecovered,
    RunRequeued,
    TurnResumed,
    TurnStarted,
)
from stead.core.fold import RunState, apply
from stead.core.messages import Usage
from stead.core.progress import (
    START,
    ProgressFrame,
    ProgressListener,
    ProgressRead,
    ProgressSink,
    ProgressWindow,
)
from stead.core.states import AT_REST, FINISHED, RESUMABLE, RunStatus
from stead.errors import (
    ApprovalError,
    Conflict,
    Fenced,
    LeaseHeld,
    StoreError,
    UnknownAgent,
    UserError,
)
from stead.runtime import _checks as checks
from stead.runtime._agent import Agent
from stead.runtime._executor import Executor, InProcessExecutor
from stead.runtime._loop import Backoff, RunLoop
from stead.runtime._session import RunSession
from stead.store import Claim, RunRecord, Store, StoredEvent, open_store

log = logging.getLogger("stead.runtime")


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A call waiting on a person."""

    tool_call_id: str
    """The call."""
    tool: str
    """Its tool."""
    reason: str
    """outcome_unknown or policy."""
    token: str
    """The single-use token a decision quotes."""
    payload: dict[str, Any]
    """What the person is shown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """What a caller sees of a run."""

    run_id: str
    """Run id."""
    agent: str
    """Agent name."""
    status: RunStatus
    """Current status."""
    output: str | None
    """Final answer, once completed."""
    stop_reason: str | None
    """Why it completed."""
    error: dict[str, Any] | None
    """Last failure, cancellation or timeout."""
    usage: Usage
    """Aggregated usage."""
    turns: int
    """Turns started."""
    seq: int
    """Events in the log."""
    approvals: tuple[PendingApproval, ...] = field(default=())
    """Pending approvals."""

    @classmethod
    def of(cls, state: RunState) -> RunView:
        """Project a folded state."""
        assert state.status is not None
        return cls(
            run_id=state.run_id,
            agent=state.agent,
            status=state.status,
            output=state.output,
            stop_reason=state.stop_reason,
            error=state.error,
            usage=state.usage,
            turns=state.turn_index + 1,
            seq=state.seq,
            approvals=tuple(
                PendingApproval(
                    tool_call_id=a.tool_call_id,
                    tool=state.calls[a.tool_call_id].name,
                    reason=a.reason,
                    token=a.token,
                    payload=dict(a.payload or {}),
                )
                for a in state.approvals.values()
            ),
        )


DECISIONS = get_args(Decision)
"""What ``decide`` takes."""


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


def _timeouts(now: float, state: RunState) -> list[Event]:
    return timeout_events(state, now)


def _with(state: RunState, event: Event) -> RunState:
    """``state`` with ``event`` applied, leaving ``state`` untouched."""
    probe = state.copy()
    apply(probe, event)
    return probe


def _owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _dead_local_owner(owner: str | None) -> bool:
    """True when ``owner`` names a process on this host that no longer exists."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Runtime:
    """Start, drive and steer durable runs."""

    def __init__(
        self,
        store: str | Path | Store = "sqlite:///stead.db",
        *,
        agents: Iterable[Agent] = (),
        lease_ttl: float = 30.0,
        clock: Callable[[], float] = time.time,
        snapshot_every: int = 256,
        executor_factory: Callable[[Agent, ProgressSink | None], Executor] | None = None,
        on_progress: ProgressListener | None = None,
        backoff: Backoff | None = None,
        progress: ProgressWindow | None = None,
    ) -> None:
        """``on_progress`` gets every streamed ``ProgressFrame`` (provisional text) as it
        arrives; ``progress`` (or ``self.progress``) is the bounded window readers poll."""
        if not isinstance(store, str | Path) and not all(
            hasattr(store, m) for m in ("create_run", "append", "read_events", "claim")
        ):
            raise UserError(
                f"Runtime needs a store URL (sqlite:///path.db, postgresql://host/db), a Path or "
                f"a Store, not {type(store).__name__}"
            )
        if isinstance(agents, Agent):
            raise UserError("agents takes a list of Agents, not one Agent; pass agents=[agent]")
        if isinstance(agents, str | bytes) or not isinstance(agents, Iterable):
            raise UserError(f"agents takes a list of Agents, not {type(agents).__name__}")
        agents = list(agents)
        for a in agents:
            if not isinstance(a, Agent):
                raise UserError(f"agents takes Agents, and {type(a).__name__} is not one")
        checks.seconds("lease_ttl", lease_ttl)
        checks.count("snapshot_every", snapshot_every, 1)
        self.store: Store = store if not isinstance(store, str | Path) else open_store(store)
        self.agents: dict[str, Agent] = {}
        for a in agents:
            self.register(a)
        self.owner = _owner_id()
        self.lease_ttl = lease_ttl
        self.clock = clock
        self.snapshot_every = snapshot_every
        self.progress = progress or ProgressWindow()
        if on_progress is not None:
            self.progress.subscribe(on_progress)
        self.backoff = backoff or Backoff()
        self.watch_interval = 0.2
        self._driving: set[str] = set()
        """Runs a ``run`` of this Runtime is driving now. The store lets an owner claim its
        own lease again (a retry after a failed release), so it cannot tell two drivers in
        one process apart: this set does."""
        self._executor_factory = executor_factory or (
            lambda agent, sink: InProcessExecutor(
                agent.model, agent.registry, sink, cancel_grace=agent.limits.cancel_grace
            )
        )

    def register(self, agent: Agent) -> None:
        """Make ``agent`` available to drive runs that name it."""
        if not isinstance(agent, Agent):
            raise UserError(f"register() takes an Agent, not {type(agent).__name__}")
        if agent.name in self.agents and self.agents[agent.name] is not agent:
            raise UserError(f"two different agents are named {agent.name!r}")
        self.agents[agent.name] = agent

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the store."""
        await self.store.close()

    # -- lifecycle --------------------------------------------------------------------------

    async def start(
        self,
        agent: Agent | str,
        input: str,
        *,
        run_id: str | None = None,
        session_id: str = "",
        correlation_id: str = "",
        config: dict[str, Any] | None = None,
    ) -> str:
        """Create a queued run and return its id (nothing runs until ``run``).

        Every argument is checked first: a wrong one is a ``UserError`` and nothing is written
        (``input`` is the user's text, a ``str``; ids are non-empty plain text).
        """
        if not isinstance(agent, Agent | str):
            raise UserError(
                f"start() takes an Agent or the name of a registered one, not "
                f"{type(agent).__name__}"
            )
        checks.text("the run's input", input)
        if run_id is not None:
            checks.identifier("run_id", run_id)
        checks.label("session_id", session_id)
        checks.label("correlation_id", correlation_id)
        checks.json_object("config", config)
        name = agent.name if isinstance(agent, Agent) else agent
        if isinstance(agent, Agent):
            self.register(agent)
        elif name not in self.agents:
            raise UnknownAgent(f"no agent named {name!r} is registered with this Runtime")
        rid = run_id or f"run_{uuid.uuid4().hex}"
        await self.store.create_run(
            RunCreated(
                run_id=rid,
                agent=name,
                input=input,
                session_id=session_id,
                correlation_id=correlation_id or rid,
                config=config,
            ),
            now=self.clock(),
        )
        return rid

    async def run(self, run_id: str, *, claim: Claim | None = None) -> RunView:
        """Drive the run until it completes, fails, or waits on a person; return its view.

        With ``claim`` (a lease ``store.claim_next`` gave this runtime's owner), drive under
        that lease instead of claiming one; the caller keeps it and releases it.

        A run this Runtime is driving already (another ``run`` or ``resume`` of it has not
        returned) is refused with ``LeaseHeld``, as another process would be.
        """
        record = await self.store.get_run(run_id)
        if record.status in AT_REST:
            state, _ = await RunSession.load_state(self.store, run_id)
            if timeout_events(state, self.clock()):
                state = await self._append_external(
                    run_id, lambda s: timeout_events(s, self.clock())
                )
            if not self._has_work_while_waiting(state, record.agent):
                return RunView.of(state)
        agent = self._agent_named(record.agent, run_id)
        # Checked and marked with no await in between: of two concurrent calls, one drives.
        if run_id in self._driving:
            raise LeaseHeld(
                f"run {run_id} is already being driven by this Runtime ({self.owner}); "
                "wait for that call to return"
            )
        self._driving.add(run_id)
        try:
            return await self._claim_and_drive(run_id, record, agent, claim)
        finally:
            self._driving.discard(run_id)

    async def _claim_and_drive(
        self, run_id: str, record: RunRecord, agent: Agent, claim: Claim | None
    ) -> RunView:
        if claim is None:
            takeover = record.lease_owner if _dead_local_owner(record.lease_owner) else None
            epoch = await self.store.claim(
                run_id,
                owner=self.owner,
                now=self.clock(),
                ttl=self.lease_ttl,
                takeover_from=takeover,
            )
            previous_owner = record.lease_owner
        else:
            epoch, previous_owner = claim.epoch, claim.previous_owner
        try:
            state, snap_seq = await RunSession.load_state(self.store, run_id)
            session = RunSession(
                self.store,
                state,
                epoch=epoch,
                owner=self.owner,
                clock=self.clock,
                tools=agent.registry.specs(),
                limits=agent.limits,
                snapshot_every=self.snapshot_every,
                snapshot_seq=snap_seq,
            )
            if state.status not in (RunStatus.QUEUED,) and previous_owner:
                await session.append(
                    [RunRecovered(owner=self.owner, epoch=epoch, previous_owner=previous_owner)],
                    automatic=False,
                )
            signal = AbortSignal()
            executor = self._executor_factory(agent, self.progress)
            loop = RunLoop(session, agent, executor, signal, backoff=self.backoff)
            # The lease heartbeat and the cancel watcher start a moment after the drive: a
            # run that rests sooner (most turns on a fast model) never pays for two tasks.
            # The watcher's first look then still sees a cancel written in that moment.
            helpers: list[asyncio.Task[None]] = []
            aio = asyncio.get_running_loop()

            def start_helpers() -> None:
                helpers.append(aio.create_task(self._heartbeat(session, signal)))
                helpers.append(aio.create_task(self._watch(session, signal)))

            timer = aio.call_later(min(self.watch_interval / 4, self.lease_ttl / 3), start_helpers)
            try:
                await loop.drive()
            finally:
                timer.cancel()
                for h in helpers:
                    h.cancel()
                # Wait for the helpers without swallowing a cancellation of *this* task:
                # gather collects theirs, and an outer cancel still propagates.
                if helpers:
                    await asyncio.gather(*helpers, return_exceptions=True)
            return RunView.of(session.state)
        finally:
            if claim is None:
                with contextlib.suppress(Exception):
                    await self.store.release(run_id, owner=self.owner, epoch=epoch)

    def _has_work_while_waiting(self, state: RunState, agent_name: str) -> bool:
        """A run waiting on a person may still have calls that need none (a sibling its
        worker died running): those are driven now, not after the decision."""
        agent = self.agents.get(agent_name)
        if state.status is not RunStatus.AWAITING_APPROVAL or agent is None:
            return False
        return isinstance(next_step(state, agent.registry.specs(), agent.limits), RunTools)

    async def _heartbeat(self, session: RunSession, signal: AbortSignal) -> None:
        """Renew the lease every third of its TTL until the run rests.

        A renewal the store could not make (the database restarting, a dropped connection)
        is tried again at the next beat rather than given up: the lease is still ours until it
        expires, and a heartbeat that stopped would let it lapse under a live worker, so that
        another worker took the run over while its tools still ran. If the lease did lapse
        and someone claimed the run meanwhile, the next renewal that reaches the store is
        refused, and the run stops as fenced.
        """
        run_id = session.state.run_id
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                await self.store.renew(
                    run_id,
                    owner=self.owner,
                    epoch=session.epoch,
                    now=self.clock(),
                    ttl=self.lease_ttl,
                )
            except Fenced:
                session.fenced = True
                signal.abort("lease lost: another worker took this run over")
                return
            except StoreError as exc:
                log.warning("renewing the lease of run %s failed (retrying): %s", run_id, exc)

    async def _watch(self, session: RunSession, signal: AbortSignal) -> None:
        """Notice, within ``watch_interval``, a cancel request another process appended.

        A read the store could not make (the database restarting, a locked file) is tried
        again after ``watch_interval``, as the heartbeat does: a watcher that stopped would
        leave the run deaf to cancel requests for the rest of its drive.
        """
        run_id = session.state.run_id
        seen = session.state.seq
        while not signal.aborted:
            # Our own appends advance the session before the store, so they never wake us:
            # only another process's write does.
            seen = max(seen, session.state.seq)
            try:
                last = await self.store.wait_changed(run_id, seen, self.watch_interval)
                if last <= max(seen, session.state.seq):
                    continue
                for stored in await self.store.read_events(run_id, after=seen):
                    if isinstance(stored.event, RunCancelRequested):
                        signal.abort(stored.event.reason or "cancelled")
                        return
            except StoreError as exc:
                log.warning(
                    "watching run %s for cancel requests failed (retrying): %s", run_id, exc
                )
                await asyncio.sleep(self.watch_interval)
                continue
            seen = last

    async def resume(self, run_id: str, reason: str = "resumed") -> RunView:
        """Continue a run: requeue it if it failed, was cancelled or timed out, then drive it.

        A run whose worker crashed (still running or awaiting_tool) is simply driven again.
        """
        state, _ = await RunSession.load_state(self.store, run_id)
        if state.status is RunStatus.COMPLETED:
            raise UserError(f"run {run_id} is completed; there is nothing to resume")
        if state.status in RESUMABLE:
            await self._append_external(run_id, lambda s: [RunRequeued(reason=reason)])
        return await self.run(run_id)

    # -- steering from any process ----------------------------------------------------------

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
        timed_out = await self._append_external(
            run_id, lambda s: timeout_events(s, now), allow_empty=True
        )
        if timed_out.status is RunStatus.TIMED_OUT:
            raise ApprovalError(
                f"run {run_id}: the approval deadline passed, so the run timed out; "
                "`stead resume` asks again"
            )
        state = await self._append_external(
            run_id,
            lambda s: decision_events(
                s,
                tool_call_id,
                decision,
                token=token,
                by=by,
                reason=reason,
                result=result,
                arguments=edited,
                now=now,
            ),
        )
        _crash.point("after_approval_commit")
        return RunView.of(state)

    async def approve(self, run_id: str, tool_call_id: str, **kw: Any) -> RunView:
        """Approve a policy-gated call (optionally with edited ``arguments``)."""
        return await self.decide(run_id, tool_call_id, "approve", **kw)

    async def deny(self, run_id: str, tool_call_id: str, reason: str, **kw: Any) -> RunView:
        """Deny a call; the model reads ``reason`` as an error result."""
        return await self.decide(run_id, tool_call_id, "deny", reason=reason, **kw)

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
        record = await self.store.get_run(run_id)
        request = RunCancelRequested(reason=reason, by=by)
        if run_id in self._driving or self._live_owner(record):
            # A run this Runtime drives is cancelled by its own driver (which watches for the
            # request), even if its lease lapsed: claiming it here would fence that driver
            # out from under a tool it is running.
            state = await self._append_external(run_id, lambda s: [request])
            _crash.point("after_cancel_commit")
            return RunView.of(state)
        takeover = record.lease_owner if _dead_local_owner(record.lease_owner) else None
        epoch = await self.store.claim(
            run_id, owner=self.owner, now=self.clock(), ttl=self.lease_ttl, takeover_from=takeover
        )
        try:
            state = await self._append_external(
                run_id,
                lambda s: [request, *cancel_events(_with(s, request), reason)],
                epoch=epoch,
            )
        finally:
            with contextlib.suppress(Exception):
                await self.store.release(run_id, owner=self.owner, epoch=epoch)
        return RunView.of(state)

    def _live_owner(self, record: RunRecord) -> bool:
        return (
            record.lease_owner is not None
            and (record.lease_expires_at or 0) > self.clock()
            and not _dead_local_owner(record.lease_owner)
        )

    async def expire_approvals(self) -> list[str]:
        """Move every run whose approval deadline passed to ``timed_out``; returns their ids.

        Waiting runs have no worker; call this periodically (a worker does) so deadlines
        fire without anyone touching the run.
        """
        expired = []
        for record in await self.store.list_runs(status=RunStatus.AWAITING_APPROVAL, limit=10_000):
            state = await self.state(record.run_id)
            now = self.clock()
            if timeout_events(state, now):
                await self._append_external(record.run_id, functools.partial(_timeouts, now))
                expired.append(record.run_id)
        return expired

    async def _append_external(
        self,
        run_id: str,
        build: Callable[[RunState], list[Event]],
        attempts: int = 5,
        *,
        epoch: int | None = None,
        allow_empty: bool = False,
    ) -> RunState:
        """Append from outside the owning worker: read, validate, write at the current epoch
        (or ``epoch``, when this process holds the lease); on a concurrent write, read again
        and re-validate."""
        for _ in range(attempts):
            state, _snap = await RunSession.load_state(self.store, run_id)
            record = await self.store.get_run(run_id)
            events = build(state)
            if not events and allow_empty:
                return state
            probe = state.copy()
            for e in events:
                apply(probe, e)
            assert probe.status is not None
            try:
                await self.store.append(
                    run_id,
                    events,
                    expected_seq=state.seq,
                    epoch=record.epoch,
                    status=probe.status.value,
                    now=self.clock(),
                )
                return probe
            except (Conflict, Fenced):
                await asyncio.sleep(0.01 + secrets.randbelow(20) / 1000)
        raise Conflict(f"run {run_id} kept changing; try again")

    # -- reading ----------------------------------------------------------------------------

    async def get(self, run_id: str) -> RunView:
        """The run's current view."""
        checks.identifier("run_id", run_id)
        state, _ = await RunSession.load_state(self.store, run_id)
        return RunView.of(state)

    async def state(self, run_id: str) -> RunState:
        """The run's folded state (for tools and tests that need everything)."""
        checks.identifier("run_id", run_id)
        state, _ = await RunSession.load_state(self.store, run_id)
        return state

    async def events(self, run_id: str, after: int = 0) -> list[StoredEvent]:
        """The run's log, after sequence ``after``."""
        checks.identifier("run_id", run_id)
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise UserError(f"after is a sequence number (an int of at least 0), not {after!r}")
        return await self.store.read_events(run_id, after)

    def _agent_for(self, state: RunState) -> Agent:
        return self._agent_named(state.agent, state.run_id)

    def _agent_named(self, name: str, run_id: str) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise UnknownAgent(
                f"run {run_id} belongs to agent {name!r}, which this Runtime was "
                f"not given (it has: {known}); pass agents=[...] to Runtime"
            )
        return agent

    # -- for readers that follow and page through runs (stead.server) -----------------------
    # New methods only below this line, so they merge apart from the ones above.

    async def list_runs(
        self,
        *,
        status: str | None = None,
        agent: str | None = None,
        before: tuple[float, str] | None = None,
        limit: int = 50,
    ) -> list[RunRecord]:
        """Runs, most recently updated first, filtered by ``status`` and ``agent``, after the
        cursor ``before`` (the (updated_at, run_id) of the last run of the previous page).

        The store lists by status only, so the agent filter and the cursor are applied here
        over at most ``scan`` rows; that is fine for a dashboard's pages, not for millions.
        """
        if limit < 1:
            raise UserError("limit must be at least 1")
        scan = 10_000
        records = await self.store.list_runs(status=status, limit=scan)
        out = []
        for r in sorted(records, key=lambda r: (r.updated_at, r.run_id), reverse=True):
            if agent is not None and r.agent != agent:
                continue
            if before is not None and (r.updated_at, r.run_id) >= before:
                continue
            out.append(r)
            if len(out) == limit:
                break
        return out

    async def requeue(self, run_id: str, reason: str = "resumed") -> RunView:
        """``resume`` without driving: send a failed, cancelled or timed-out run back to
        ``queued`` for a worker to claim (a server must not drive runs in a request).

        A run whose worker crashed is already claimable once its lease lapses; it is left
        as it is. A completed run, or one waiting on a person, is refused.
        """
        state, _ = await RunSession.load_state(self.store, run_id)
        if state.status is RunStatus.COMPLETED:
            raise UserError(f"run {run_id} is completed; there is nothing to resume")
        if state.status is RunStatus.AWAITING_APPROVAL:
            raise UserError(f"run {run_id} waits on a person: approve or deny its pending calls")
        if state.status in RESUMABLE:
            state = await self._append_external(run_id, lambda s: [RunRequeued(reason=reason)])
        return RunView.of(state)

    async def follow(
        self, run_id: str, after: int = 0, *, heartbeat: float = 15.0
    ) -> AsyncIterator[StoredEvent | ProgressRead | None]:
        """Follow a run live: its durable events after ``after`` (none missed, in order),
        the provisional text this process streams for it (``ProgressRead``, lossy), and
        ``None`` when nothing happened for ``heartbeat`` seconds. Ends after the events of a
        finished run. Durable events are read from the store, so a writer in any process is
        seen (PostgreSQL notices, SQLite polling); provisional text exists only in the
        process that drives the run.

        Causal order: a turn's text comes after that turn's ``turn_started`` and before its
        ``assistant_message``; text whose reply is already in the log is dropped as stale.

        Pull-based: the consumer sets the pace. A consumer that falls behind still gets every
        durable event (they wait in the store), while provisional frames it did not read in
        time are evicted from the bounded window (the read says ``gap``).
        """
        await self.store.get_run(run_id)  # RunNotFound before anything is yielded
        seq = after
        # The newest turn whose start the reader has been given: text of a later turn waits
        # until its start (and so the reply of the turn before) has been read from the log.
        turn = replied = -1
        if after > 0:
            known = await self.state(run_id)
            turn = known.turn_index
            replied = turn if known.turn_has_reply else turn - 1
        held = False
        cursor = START
        wake = self._follower_wake(run_id)
        aio = asyncio.get_running_loop()
        changed: asyncio.Task[int] | None = None
        last_yield = aio.time()
        try:
            while True:
                wake.clear()
                events = await self.store.read_events(run_id, after=seq)
                for stored in events:
                    seq = stored.seq
                    if isinstance(stored.event, TurnStarted | TurnResumed):
                        turn = max(turn, stored.event.turn_index)
                    elif isinstance(stored.event, AssistantMessageRecorded):
                        replied = max(replied, stored.event.turn_index)
                    yield stored
                progress = self.progress.read(run_id, cursor)
                if progress.frames and progress.frames[0].turn_index > turn and not held:
                    held = True  # its turn began after the read above: read the log first
                    continue
                held = False
                if progress.frames and progress.frames[0].turn_index <= replied:
                    cursor = progress.cursor  # the reply is in the log: its preview is stale
                    progress = ProgressRead(frames=(), reset=False, gap=False, cursor=cursor)
                if progress.frames or progress.reset:
                    cursor = progress.cursor
                    yield progress
                if events or progress.frames:
                    last_yield = aio.time()
                    continue
                record = await self.store.get_run(run_id)
                if record.status in FINISHED and record.last_seq <= seq:
                    return
                idle = aio.time() - last_yield
                if idle >= heartbeat:
                    yield None
                    last_yield, idle = aio.time(), 0.0
                if changed is None or changed.done():
                    changed = aio.create_task(self.store.wait_changed(run_id, seq, heartbeat))
                woke = aio.create_task(wake.wait())
                done, _ = await asyncio.wait(
                    {changed, woke}, timeout=heartbeat - idle, return_when=asyncio.FIRST_COMPLETED
                )
                woke.cancel()
                if changed in done:
                    changed.result()  # a store failure surfaces to the reader
        finally:
            if changed is not None:
                changed.cancel()
            self._follower_gone(run_id, wake)

    _followers: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] | None = None
    """Readers following each run's text (set up by the first ``follow``, not ``__init__``)."""

    def _follower_wake(self, run_id: str) -> asyncio.Event:
        """An event set (from any thread) whenever this process streams text for ``run_id``."""
        if self._followers is None:
            followers: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
            self._followers = followers

            def on_frame(frame: ProgressFrame) -> None:
                # A dict lookup per frame when nobody follows the run: nothing on the hot path.
                for loop, event in tuple(followers.get(frame.run_id, ())):
                    loop.call_soon_threadsafe(event.set)

            self.progress.subscribe(on_frame)
        event = asyncio.Event()
        self._followers.setdefault(run_id, set()).add((asyncio.get_running_loop(), event))
        return event

    def _follower_gone(self, run_id: str, event: asyncio.Event) -> None:
        followers = self._followers or {}
        waiting = followers.get(run_id, set())
        waiting.difference_update({w for w in waiting if w[1] is event})
        if not waiting:
            followers.pop(run_id, None)
