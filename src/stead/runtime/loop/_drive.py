"""Claiming a run and driving it: the lease (claimed, taken over at once from an owner that
died on this machine, released at the end), the heartbeat that renews it while the drive
goes on, and the watcher that hears a cancel request another process wrote."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from stead import _logs
from stead._crash import CrashHook
from stead._lease import HeldLease
from stead._signal import AbortSignal
from stead.core.builders import (
    recovered_event,
    timeout_events,
)
from stead.core.children import PARENT_KEY, waiting_children
from stead.core.decide import RunTools, next_step
from stead.core.events import (
    Event,
)
from stead.core.fold import RunState
from stead.core.progress import (
    ProgressSink,
    ProgressWindow,
)
from stead.core.reconcile import RecoveryPolicy
from stead.core.states import AT_REST, FINISHED, RunStatus
from stead.errors import (
    LeaseHeld,
    SteadError,
)
from stead.runtime.agent import Agent, RunView, check_deps, takes_id_prefix
from stead.runtime.executors import Executor, InProcessExecutor, Leased
from stead.runtime.loop._backoff import Backoff
from stead.runtime.loop._children import HandlerChildren, settle_parent
from stead.runtime.loop._fresh import FreshRuns
from stead.runtime.loop._keeper import Keeper
from stead.runtime.loop._lease_guard import LeaseGuard
from stead.runtime.loop._loop import RunLoop
from stead.runtime.loop._observe import Observer, observing
from stead.runtime.loop._owned import OwnedRun
from stead.runtime.loop._reconcile import reconcile_takeover
from stead.runtime.loop._versions import settle_version
from stead.store import Claim, RunRecord, Store
from stead.tools import CHILD_PORT

log = logging.getLogger("stead.runtime")


def owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def dead_local_owner(owner: str | None) -> bool:
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


class lease:  # named as the function it was: ``async with lease(...) as epoch``
    """Hold ``owner``'s lease on the run for the block and yield its epoch: claimed (taken
    over at once when ``record`` names an owner on this host that no longer exists), then
    released, best effort (an unreleased lease lapses after ``ttl``).

    A class, not an ``@asynccontextmanager``: that is an async generator per run, which the
    event loop also tracks in a weak set, and two more frames of ``contextlib`` each way."""

    __slots__ = ("epoch", "now", "owner", "record", "run_id", "sent_at", "store", "ttl")

    def __init__(
        self, store: Store, run_id: str, record: RunRecord, *, owner: str, now: float, ttl: float
    ) -> None:
        self.store, self.run_id, self.record = store, run_id, record
        self.owner, self.now, self.ttl = owner, now, ttl
        self.epoch = 0
        self.sent_at = 0.0
        """When the claim was sent (monotonic): the lease counts from then."""

    async def __aenter__(self) -> int:
        owner = self.record.lease_owner
        takeover = owner if dead_local_owner(owner) else None
        self.sent_at = time.monotonic()
        self.epoch = await self.store.claim(
            self.run_id, owner=self.owner, now=self.now, ttl=self.ttl, takeover_from=takeover
        )
        return self.epoch

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):  # best effort: an unreleased lease lapses
            await self.store.release(self.run_id, owner=self.owner, epoch=self.epoch)


async def _write_held(owned: OwnedRun) -> None:
    """The drive is over (it rests, raised, or was cancelled: the process shutting down):
    write what the handle holds (effects mode) before the lease goes. Best effort: what
    cannot be written (the lease lost, another writer first) is lost as in a crash."""
    if owned.holding and not owned.fenced:
        try:
            await owned.flush()
        except Exception as exc:
            log.warning("run %s: held events not written: %r", owned.state.run_id, exc)


class Driving:
    """``Runtime.run`` and what it runs beside the drive."""

    store: Store
    agents: dict[str, Agent]
    owner: str
    lease_ttl: float
    clock: Callable[[], float]
    snapshot_every: int
    progress: ProgressWindow
    backoff: Backoff
    watch_interval: float
    lease_margin: float
    """Seconds a drive's local lease deadline falls short of the store's expiry."""
    lease_min_left: float
    """Seconds of lease an effect that is not read_only needs left to start (else renewed)."""
    recovery: RecoveryPolicy = RecoveryPolicy()
    """How a takeover treats the effects the dead owner left in flight (stead.core.reconcile)."""
    observers: list[Observer]
    _driving: set[str]
    _crash: CrashHook
    _executor_factory: Callable[[Agent, ProgressSink | None], Executor]
    _fresh: FreshRuns
    _keeper: Keeper

    if TYPE_CHECKING:

        async def _append_external(
            self,
            run_id: str,
            build: Callable[[RunState], list[Event]],
            *,
            epoch: int | None = None,
        ) -> RunState: ...

        def _agent_named(self, name: str, run_id: str) -> Agent: ...

        def register(self, agent: Agent) -> None: ...

        async def _queue_next(self, conversation: str) -> str | None: ...

    @takes_id_prefix
    async def run(
        self, run_id: str, *, claim: Claim | None = None, claimed_at: float | None = None
    ) -> RunView:
        """Drive the run until it completes, fails, or waits on a person; return its view.

        With ``claim`` (a lease ``store.claim_next`` gave this runtime's owner), drive under
        that lease instead of claiming one; the caller keeps it and releases it.
        ``claimed_at`` is when that claim was sent (``time.monotonic()``): the lease counts
        from then (from now when it is not given).

        A run this Runtime is driving already (another ``run`` or ``resume`` of it has not
        returned) is refused with ``LeaseHeld``, as another process would be.
        """
        known: tuple[RunState, int] | None = None
        if claim is not None:
            # Claimed: the run's row and its state in one read (one round trip, not two), or
            # none, where the claim's own statement read them.
            loaded = claim.loaded or await self.store.load(run_id)
            record = loaded.record
            known = await OwnedRun.state_of(self.store, run_id, loaded)
        else:
            record = await self.store.get_run(run_id)
        if record.status in AT_REST:
            state, _ = known or await OwnedRun.load_state(self.store, run_id)
            if timeout_events(state, self.clock()):
                state = await self._append_external(
                    run_id, lambda s: timeout_events(s, self.clock())
                )
                known = None  # the state the drive starts from is read again
            if not self._has_work_while_waiting(state, record.agent):
                view = RunView.of(state, self.agents)
                if claim is None and waiting_children(state):
                    return await self._run_children(run_id, view)
                return view
        agent = self._agent_named(record.agent, run_id)
        check_deps(agent, getattr(self, "deps", None))  # before the lease: nothing written
        # Checked and marked with no await in between: of two concurrent calls, one drives.
        if run_id in self._driving:
            raise LeaseHeld(
                f"run {run_id} is already being driven by this Runtime ({self.owner}); "
                "wait for that call to return"
            )
        self._driving.add(run_id)
        try:
            view = await self._claim_and_drive(run_id, record, agent, claim, claimed_at, known)
        finally:
            self._driving.discard(run_id)
        if view.conversation_id and view.status in FINISHED:
            await self._next_in_conversation(view)
        if claim is None and view.status is RunStatus.AWAITING_APPROVAL:
            return await self._run_children(run_id, view)
        return view

    async def _next_in_conversation(self, view: RunView) -> None:
        """A conversation's run finished: queue the run of the message sent after it, if one
        waits (``Runtime.submit``), so any worker answers it now. Best effort: a failure here
        leaves that message to the next ``submit``, ``wait`` or a worker's sweep."""
        try:
            await self._queue_next(view.conversation_id)
        except SteadError as exc:
            log.warning("run %s: queueing the next message failed: %s", view.run_id, exc)

    async def _run_children(self, run_id: str, view: RunView) -> RunView:
        """``run`` of a run that rests on its child runs: drive the children this Runtime
        knows and nobody else drives, here, then the run again once they gave it their
        results (a worker's ``run`` takes a claim and leaves children to be claimed)."""
        state, _ = await OwnedRun.load_state(self.store, run_id)
        drove = False
        for child_id in waiting_children(state).values():
            child = await self.store.get_run(child_id)
            if child.status in AT_REST or child.agent not in self.agents:
                continue
            try:
                await self.run(child_id)
            except LeaseHeld:
                continue  # another process drives it; its end wakes this run there
            drove = True
        return await self.run(run_id) if drove else view

    async def _claim_and_drive(
        self,
        run_id: str,
        record: RunRecord,
        agent: Agent,
        claim: Claim | None,
        claimed_at: float | None,
        known: tuple[RunState, int] | None = None,
    ) -> RunView:
        if claim is not None:
            sent = time.monotonic() if claimed_at is None else claimed_at
            held = self._held_lease(claim.epoch, sent)
            return await self._drive(run_id, agent, held, claim.previous_owner, known)
        held_lease = lease(
            self.store, run_id, record, owner=self.owner, now=self.clock(), ttl=self.lease_ttl
        )
        async with held_lease as epoch:
            held = self._held_lease(epoch, held_lease.sent_at)
            fresh = self._fresh.state(run_id, record, epoch)  # just created here: not re-read
            start = None if fresh is None else (fresh, 0)
            return await self._drive(run_id, agent, held, record.lease_owner, start)

    def _lease(self, run_id: str, record: RunRecord) -> AbstractAsyncContextManager[int]:
        """This process's lease on the run for the ``async with`` block (see ``lease``)."""
        return lease(
            self.store, run_id, record, owner=self.owner, now=self.clock(), ttl=self.lease_ttl
        )

    def _held_lease(self, epoch: int, sent_at: float) -> HeldLease:
        """The local deadline of a lease at ``epoch`` claimed by a statement sent then."""
        ttl = self.lease_ttl
        return HeldLease(token=epoch, ttl=ttl, margin=self.lease_margin, sent_at=sent_at)

    async def _drive(
        self,
        run_id: str,
        agent: Agent,
        held: HeldLease,
        previous_owner: str | None,
        start: tuple[RunState, int] | None = None,
    ) -> RunView:
        ids = _logs.bind_run(run_id)  # every record of the drive carries the run's id
        try:
            return await self._drive_bound(run_id, agent, held, previous_owner, start)
        finally:
            held.close()
            _logs.unbind(ids)

    async def _drive_bound(
        self,
        run_id: str,
        agent: Agent,
        held: HeldLease,
        previous_owner: str | None,
        start: tuple[RunState, int] | None,
    ) -> RunView:
        """Drive under the lease ``held`` (its token the epoch), from the log's state, or from
        ``start`` (a state and the sequence its snapshot covers) read under that lease
        already: a claimed run's, read with its row, or the state of a run created here that
        nothing has touched since (``FreshRuns``)."""
        epoch = held.token
        if start is None:
            start = await OwnedRun.load_state(self.store, run_id)
        state, snap_seq = start
        owned = OwnedRun(
            self.store,
            state,
            epoch=epoch,
            owner=self.owner,
            clock=self.clock,
            tools=agent._parts.specs,
            limits=agent.limits,
            snapshot_every=self.snapshot_every,
            snapshot_seq=snap_seq,
            durability=agent.durability,
        )
        if not await settle_version(owned, agent, self.owner, epoch):
            return RunView.of(owned.state, self.agents)  # another version's, or failed
        takeover = state.status not in (RunStatus.QUEUED,) and bool(previous_owner)
        if takeover:
            await owned.append(
                [recovered_event(self.owner, epoch, previous_owner or "")],
                automatic=False,
            )
        observers = self.observers if agent.observer is None else [*self.observers, agent.observer]
        deps = getattr(self, "deps", None)
        hooks = await observing(observers, owned, agent, previous_owner, deps)
        signal = AbortSignal()
        guard = LeaseGuard(
            held,
            owned,
            signal,
            store=self.store,
            owner=self.owner,
            ttl=self.lease_ttl,
            clock=self.clock,
            min_left=self.lease_min_left,
        )
        inner = self._executor_factory(agent, self.progress)
        # The plain class first: a protocol's isinstance costs microseconds, every drive.
        if isinstance(inner, (InProcessExecutor, Leased)):
            inner.lease = held
        # Held events (effects mode) are written before an effect that may leave the process.
        owned.flush_before_effects = not isinstance(inner, InProcessExecutor)
        executor = hooks.executor(inner)
        loop = RunLoop(owned, agent, executor, signal, backoff=self.backoff, crash=self._crash)
        loop.lease = guard
        # A handler's ``ToolContext.run_child`` reaches this drive through a context
        # variable: the drive's task and the tools' tasks see it, an executor pool's not.
        loop.children = HandlerChildren(owned, agent, self.register, self.clock, self._crash)
        port = CHILD_PORT.set(loop.children)
        # The Runtime's keeper renews the lease and hears a cancel request from another
        # process (runtime/loop/_keeper.py): it takes the run a moment after the drive starts, so a
        # run that rests sooner (most turns on a fast model) never costs it anything. Its
        # first look then still sees a cancel written in that moment.
        aio = asyncio.get_running_loop()
        delay = min(self.watch_interval / 4, self.lease_ttl / 3)
        timer = aio.call_later(delay, self._keeper.hold, owned, signal, held)
        error: BaseException | None = None
        try:
            if takeover:  # what the dead owner left in flight, before the drive goes on
                await reconcile_takeover(loop, self.recovery)
            await loop.drive()
            recorded = getattr(executor, "recorded", None)  # a pool's: acknowledge the last
            if recorded is not None:
                await recorded()
            if owned.state.status in FINISHED and PARENT_KEY in owned.state.config:
                self._crash("before_parent_settled", None)
                await settle_parent(
                    self.store,
                    owned.state,
                    clock=self.clock,
                    owner=self.owner,
                    snapshot_every=self.snapshot_every,
                )
        except BaseException as exc:
            error = exc
            raise
        finally:
            CHILD_PORT.reset(port)
            await _write_held(owned)
            hooks.ended(owned.state, error)
            timer.cancel()
            self._keeper.drop(owned)
            loop.deadline.stop()
        return RunView.of(owned.state, self.agents)

    def _has_work_while_waiting(self, state: RunState, agent_name: str) -> bool:
        """A run waiting on a person may still have calls that need none (a sibling its
        worker died running): those are driven now, not after the decision."""
        agent = self.agents.get(agent_name)
        if state.status is not RunStatus.AWAITING_APPROVAL or agent is None:
            return False
        return isinstance(next_step(state, agent._parts.specs, agent.limits), RunTools)
