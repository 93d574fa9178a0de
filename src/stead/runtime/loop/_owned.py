"""One owner's handle on one run: its folded state, its epoch, and the only way to append.

Every append is validated by folding it into the in-memory state first (so an illegal event
is refused before it is written), then written with the expected sequence and the owner's
epoch (so a stale writer is refused by the store in the same transaction). Anything that goes
wrong after the state was touched reloads the state from the store: the log is the truth,
memory is a cache.

Other processes may append to a run its owner is driving (a cancel request, a person's
decision on one of several calls). The owner then meets a ``Conflict``: it reloads, and if
what it meant to append still applies to the new state, appends it again. Those appends take
this same path: ``OwnedRun.steering`` opens a handle at the run's current epoch without a
lease (or at the epoch of a lease the caller holds), whose appends add no automatic events
(the owner adds them) and which, meeting a newer epoch, moves to it and tries again.

**Held events (the ``effects`` mode).** A commit nothing outside the log depends on
(``stead.core.durability.must_sync`` says which) is not written at once: its events are folded
into the state, their sequence numbers taken, and held in memory until the next commit that
must be durable, which writes them together with its own (one append: one transaction, one
fsync). Whatever makes the log a decision point outside this process writes them first:
``flush`` (the drive ending, an effect handed to a pool, ``reload``). Held events are what a
crash of this process loses: model replies and ``read_only`` / ``idempotent_write`` results,
done again by the next owner. Another writer's append meanwhile makes the held append
conflict: the handle drops what it held, reads the log again and raises ``Rewound``, and the
drive goes on from the log's state (``rewinds`` counts those, for the loop to tell).

**A commit ahead of the model call** (a store whose commit is a network round trip,
``Store.commits_ahead``). A commit after which the run's next step is a model call (a tool
turn's last result, which opens the next turn; a drive's ``run_started``) is sent and left in
flight while the model is called, instead of awaited first: a tool turn then waits for one
commit, its intent, not two. Nothing outside the log acts on it meanwhile: the model call is
an effect that is made again when its reply is not recorded, and its reply is appended only
once that commit has landed (``_land``, at the start of the next append, and of ``flush``
and ``reload``); a crash meanwhile is the crash just before that commit, which recovery
already handles by the call's effect class. ``when_durable`` runs a callback (a crash point)
once it landed. A commit ahead that another writer's append refused is written again on the
log's state, and the step taken on it (the model's reply) is dropped: ``Rewound``, and the
drive decides again from the log. docs/design.md has the argument in full.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from stead.core.builders import stamp_asked
from stead.core.decide import (
    OPENING_STEPS,
    CallModel,
    Step,
    ToolSpec,
    after_opening,
    automatic_events,
    next_step,
)
from stead.core.durability import Durability, must_sync
from stead.core.events import Event
from stead.core.fold import RunState, apply
from stead.core.limits import Limits
from stead.core.states import RunStatus
from stead.errors import Conflict, CorruptEvent, Fenced, IllegalTransition, StoreError
from stead.runtime.loop._history import hydrate
from stead.store import Loaded, Store, StoredEvent

Batch = Sequence[Event] | Callable[[RunState], Sequence[Event]]
"""Events to append, or a function building them from the current state (rebuilt after a
concurrent write)."""


def _fold(run_id: str, state: RunState, events: Sequence[StoredEvent]) -> RunState:
    """Fold stored events onto ``state``; an event that does not apply is a corrupt log."""
    for stored in events:
        try:
            apply(state, stored.event, stored.seq)
        except (IllegalTransition, Conflict, ValueError) as exc:
            raise CorruptEvent(
                run_id,
                stored.seq,
                f"{stored.event.kind} does not follow from the events before it ({exc}); the "
                "log was cut or changed outside stead",
            ) from exc
    return state


_VALUES: Final = {s: s.value for s in RunStatus}
"""A status's text by lookup: ``.value`` of an enum member is two Python calls, per append."""


class _Stale(Exception):
    """The log moved on under us; the state was reloaded and the append may be retried."""


class Rewound(Conflict):
    """Another writer appended while this handle held events (``effects`` mode): they are
    dropped, as a crash would drop them, and the state is the log's again. The append that
    met it is not written; the drive goes on from the state the log now says."""


HOLD_EVENTS: Final = 96
"""At most this many events held before they are written anyway (unsynced): what a crash
can make the next owner do again stays bounded, and so does the memory."""
HOLD_SECONDS: Final = 1.0
"""Events held longer than this (by the handle's clock) are written with the next append
(unsynced): readers of the log see a run's progress within about a second."""


class _Ahead:
    """A commit left in flight while the model is called (see the module docstring)."""

    __slots__ = ("count", "events", "sync", "task")

    def __init__(self, task: asyncio.Task[int], events: Batch, count: int, sync: bool) -> None:
        self.task = task
        self.events = events
        """What the caller appended (written again should another writer come first)."""
        self.count = count
        """Events the commit writes (held ones included)."""
        self.sync = sync


def _quiet(task: asyncio.Task[int]) -> None:
    """A commit ahead's failure is read where it lands (``_land``); this keeps asyncio from
    reporting it as never retrieved when the handle is given up first (a lost lease)."""
    if not task.cancelled():
        task.exception()


def _then(fn: Callable[..., None], args: tuple[Any, ...], task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is None:
        fn(*args)


class OwnedRun:
    """The state and epoch of a run this process owns."""

    def __init__(
        self,
        store: Store,
        state: RunState,
        *,
        epoch: int,
        owner: str,
        clock: Callable[[], float],
        tools: Mapping[str, ToolSpec],
        limits: Limits,
        snapshot_every: int = 256,
        snapshot_seq: int = 0,
        conflict_retries: int = 8,
        durability: Durability = "strict",
    ) -> None:
        self.store = store
        self.state = state
        self.epoch = epoch
        self.owner = owner
        self.clock = clock
        self.tools = tools
        self.limits = limits
        self.snapshot_every = snapshot_every
        self._snapshot_seq = snapshot_seq
        self._conflict_retries = conflict_retries
        self.durability = durability
        """The agent's mode: which commits wait for the disk (``stead.core.durability``)."""
        self._busy = False
        self._waiters: list[asyncio.Future[None]] = []
        self.fenced = False
        self._step: Step | None = None
        self._step_seq = 0
        """``_step`` was decided at this sequence (two fields, not a tuple per decision)."""
        self.leased = True
        """False for a ``steering`` handle without a lease: it writes at whatever epoch the
        run is at."""
        self.on_commit: Callable[[RunState, list[Event]], None] | None = None
        """Told of every commit (``stead.runtime.loop._observe``), a held one when it is held;
        None unless someone watches."""
        self.steering_only = False
        """True for a ``steering`` handle: it appends no automatic events (it has no tools
        or limits to compute them from; the owner's next step does that)."""
        self._held: list[Event] = []
        """Events folded into ``state`` but not written yet (``effects`` mode only)."""
        self.prefix: list[Event] = []
        """Events to write first in the next append (an agent version recorded at the
        drive's start rides with its first commit instead of costing one of its own)."""
        self._held_since = 0.0
        self.rewinds = 0
        """How many times held events were dropped because another writer appended."""
        self.flush_before_effects = False
        """Write held events before every effect (the executor may hand it to a pool in
        another process, whose work must not rest on events this process may lose)."""
        self._ahead: _Ahead | None = None
        """The commit in flight while the model is called, if one is."""
        self._commits_ahead = store.commits_ahead

    @classmethod
    async def steering(
        cls,
        store: Store,
        run_id: str,
        *,
        clock: Callable[[], float],
        epoch: int | None = None,
        owner: str = "",
        snapshot_every: int = 256,
    ) -> OwnedRun:
        """A handle for appends from outside the owning worker (a decision, a cancel, a
        requeue, a timeout): at ``epoch`` when the caller holds the lease, else at the run's
        current epoch, without a lease. Its appends carry no automatic events; what they
        make due is the owner's next step."""
        state, snapshot_seq = await cls.load_state(store, run_id)
        leased = epoch is not None
        if epoch is None:
            epoch = (await store.get_run(run_id)).epoch
        owned = cls(
            store,
            state,
            epoch=epoch,
            owner=owner,
            clock=clock,
            tools={},
            limits=Limits(),
            snapshot_every=snapshot_every,
            snapshot_seq=snapshot_seq,
        )
        owned.leased = leased
        owned.steering_only = True
        return owned

    @staticmethod
    async def load_state(store: Store, run_id: str) -> tuple[RunState, int]:
        """Current state of a run and the sequence its snapshot covers.

        What a resume relies on is verified: the snapshot's checksum (the store ignores a
        snapshot that fails it, and the whole log is folded instead) and every event after
        it, decoded and folded. The rows the snapshot covers are not read again (that is
        what keeps resuming a long run cheap): the sequence returned says how far that
        goes, and ``verify`` reads every row. An event that does not fold onto the state
        before it (a log cut inside one transaction, a row changed by hand) is a
        ``CorruptEvent`` naming the run and the sequence.
        """
        return await OwnedRun.state_of(store, run_id, await store.load(run_id))

    @staticmethod
    async def state_of(store: Store, run_id: str, loaded: Loaded) -> tuple[RunState, int]:
        """``load_state`` of what ``store.load`` gave: a caller that needs the run's row too
        (a worker starting a run it claimed) reads both in one statement."""
        if loaded.snapshot is not None:
            try:
                start: RunState | None = RunState.from_json(loaded.snapshot)
            except (ValueError, KeyError, TypeError, AttributeError):
                start = None
            if start is not None and start.seq == loaded.snapshot_seq:
                _fold(run_id, start, loaded.tail)
                return start, loaded.snapshot_seq
        events = loaded.tail if loaded.snapshot_seq == 0 else await store.read_events(run_id)
        return _fold(run_id, RunState(), await hydrate(store, events)), 0

    @staticmethod
    async def verify(store: Store, run_id: str) -> int:
        """Read, decode and fold every event of the run, and check the snapshot a resume
        would start from against that fold; return how many events were checked.

        ``CorruptEvent`` names the first row that does not decode or does not fold;
        ``StoreError`` says when the snapshot disagrees with its log. What ``load_state``
        skips (the rows under the snapshot), this reads.
        """
        loaded = await store.load(run_id)
        events = await hydrate(store, await store.read_events(run_id))
        state = RunState()
        covered = loaded.snapshot_seq if loaded.snapshot is not None else 0
        _fold(run_id, state, events[:covered])
        if loaded.snapshot is not None:
            try:
                same = RunState.from_json(loaded.snapshot).to_json() == state.to_json()
            except (ValueError, KeyError, TypeError, AttributeError):
                same = False
            if not same:
                raise StoreError(
                    f"run {run_id}: the snapshot at seq {covered} is not the fold of the events "
                    "it covers; delete the run's snapshot row to resume from the log alone"
                )
        _fold(run_id, state, events[covered:])
        return state.seq

    def next_step(self) -> Step:
        """``next_step`` of the current state, computed once per sequence number (``append``
        already computes it for the automatic events)."""
        step, seq = self._step, self.state.seq
        if step is None or self._step_seq != seq:
            step = self._step = next_step(self.state, self.tools, self.limits)
            self._step_seq = seq
        return step

    async def reload(self) -> None:
        """Write what is held (``flush``), then fold the state again from the store."""
        if (self._held or self._ahead is not None) and not self.fenced:
            try:
                await self.flush()
            except (Rewound, Fenced):
                return  # dropped, and the state read again from the log
        await self._reread()

    async def _reread(self) -> None:
        """Throw away the in-memory state, held events included, and fold it again (once a
        commit in flight, if any, ended: what it wrote is then read back)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and not ahead.task.done():
            with contextlib.suppress(Exception):
                await asyncio.wait([ahead.task])
        self._held = []
        self._step = None  # decided on the state thrown away (its seq may come again)
        self.state, self._snapshot_seq = await self.load_state(self.store, self.state.run_id)

    @property
    def holding(self) -> int:
        """How many events are not known to be durable: held (``effects`` mode), or in a
        commit ahead still in flight."""
        ahead = self._ahead
        return len(self._held) if ahead is None else len(self._held) + ahead.count

    @property
    def durable_seq(self) -> int:
        """The last sequence the store is known to have (``state.seq`` less the held events
        and a commit in flight): what the keeper compares with the run's row to tell another
        writer's append from ours."""
        return self.state.seq - self.holding

    def when_durable(self, fn: Callable[..., None], *args: Any) -> None:
        """``fn(*args)`` once what was appended is durable: now, or when the commit ahead
        lands (never, should it fail: it is then written again, or lost with the process)."""
        ahead = self._ahead
        if ahead is None:
            fn(*args)
        else:
            ahead.task.add_done_callback(functools.partial(_then, fn, args))

    async def _land(self, ahead: _Ahead) -> None:
        """Wait for the commit ahead. Refused because another writer came first: written
        again on the log's state, and ``Rewound`` (the step taken on it is dropped); fenced
        or failed: the state read again and the error raised, as an append's would be."""
        task = ahead.task
        if not task.done():
            await asyncio.wait([task])  # a cancel of the caller leaves the commit in flight
        self._ahead = None
        failure: BaseException | None = (
            StoreError(f"run {self.state.run_id}: a commit was interrupted")
            if task.cancelled()
            else task.exception()
        )
        if failure is None:
            return
        await self._reread()
        if isinstance(failure, Fenced):
            self.fenced = True
            raise failure
        if not isinstance(failure, Conflict):
            raise failure
        self.rewinds += 1
        with contextlib.suppress(Conflict, IllegalTransition, ValueError):  # no longer applies
            await self._append_retrying(ahead.events, True, ahead.sync)
        raise Rewound(
            f"run {self.state.run_id}: another writer appended while a commit was in flight; "
            "it is written again on the log's state and the step after it is taken again"
        ) from failure

    def _hold(self, state: RunState, batch: list[Event]) -> bool:
        """Hold ``batch`` (already folded into ``state``) for the next durable commit; False
        when too many events, or too old ones, are held already: write them now."""
        now = self.clock()
        if not self._held:
            self._held_since = now
        elif len(self._held) + len(batch) >= HOLD_EVENTS or now - self._held_since >= HOLD_SECONDS:
            return False
        self._held.extend(batch)
        if self.on_commit is not None:
            self.on_commit(state, batch)
        return True

    async def flush(self, *, sync: bool = True) -> None:
        """Write the held events now, and wait for a commit in flight: the run's log becomes
        what this process knows (before it stops driving the run, or hands an effect to
        another process). Raises ``Rewound`` when another writer appended meanwhile (held
        events are dropped), ``Fenced`` when the lease is lost."""
        if self._held or self._ahead is not None:
            await self.append((), automatic=False, sync=sync)

    async def before_effect(self) -> None:
        """Called before each effect: the held events written when the executor may hand it
        to another process (a pool), whose work must not rest on events this process may
        lose. Unsynced: the pool's own record of the effect commits after them, in the same
        log of the database, so it is never durable without them."""
        if self.flush_before_effects and (self._held or self._ahead is not None):
            await self.flush(sync=False)

    async def append(self, events: Batch, *, automatic: bool = True, sync: bool = True) -> RunState:
        """Validate, then durably append (plus the automatic bookkeeping the events make due,
        in the same commit). Returns the new state.

        One append of a handle at a time (the calls of one turn settle concurrently): a
        flag and a list of waiters, which cost nothing when, as nearly always, nobody waits.
        """
        while self._busy:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        self._busy = True
        try:
            if self._ahead is not None:
                await self._land(self._ahead)
            try:  # the first try inline: a coroutine less on every append
                return await self._append_once(events, automatic, sync)
            except _Stale:
                return await self._append_retrying(events, automatic, sync, 1)
        finally:
            self._busy = False
            if self._waiters:  # every waiter looks again: one cancelled meanwhile blocks none
                waiters, self._waiters = self._waiters, []
                for w in waiters:
                    if not w.done():
                        w.set_result(None)

    async def _append_retrying(
        self, events: Batch, automatic: bool, sync: bool, tried: int = 0
    ) -> RunState:
        """``_append_once`` until it is not ``_Stale`` (``tried`` times it was already)."""
        for attempt in range(tried, self._conflict_retries):
            # After a try someone else wrote first at, the state is reloaded: try again (a
            # batch that no longer applies is refused by apply(), the honest answer); a
            # steering writer backs off from the owner first.
            if attempt and not self.leased:
                await asyncio.sleep(0.01 + secrets.randbelow(20) / 1000)
            try:
                return await self._append_once(events, automatic, sync)
            except _Stale:
                continue
        raise Conflict(f"run {self.state.run_id}: gave up after repeated concurrent writes")

    async def _append_once(self, events: Batch, automatic: bool, sync: bool) -> RunState:
        if self.fenced:
            raise Fenced(f"run {self.state.run_id}: this worker lost its lease")
        state = self.state
        before = state.seq
        batch = list(events(state) if callable(events) else events)
        if self.prefix:
            batch[:0], self.prefix = self.prefix, []
        calls = state.calls  # the turn's calls, which a turn_started in the batch replaces
        if state.deadline is not None and not state.deadline_counts_waiting:
            batch = stamp_asked(batch, self.clock())  # a wait its deadline leaves out
        try:
            for e in batch:
                apply(state, e)
            if automatic and not self.steering_only:
                # Decided here for the state the batch made (never the cached one: the batch
                # moved the sequence on), and kept for the drive's ``next_step``.
                step = self._step = next_step(state, self.tools, self.limits)
                self._step_seq = state.seq
                if type(step) in OPENING_STEPS:  # else automatic_events is [] (a frame less)
                    extra = automatic_events(state, step)
                    for e in extra:
                        apply(state, e)
                    if extra and (known := after_opening(step)) is not None:
                        self._step, self._step_seq = known, state.seq  # the drive's, decided
                    batch.extend(extra)
        except (IllegalTransition, Conflict, ValueError):
            await self._reread()
            raise
        written = batch
        if self.durability != "strict":  # strict never holds: its path is as it always was
            if batch and not must_sync(self.durability, state, batch, calls):
                if self._hold(state, batch):
                    return state
                sync = False  # too many, or too old: written now, without the fsync
            if self._held:
                written, self._held = [*self._held, *batch], []
                before = state.seq - len(written)
        if not written:
            return state
        snapshot = None
        if state.seq - self._snapshot_seq >= self.snapshot_every:
            snapshot = (state.seq, state.to_json())
        assert state.status is not None
        following = self._step
        if (
            self._commits_ahead
            and snapshot is None
            and type(following) is CallModel
            and following.turn_recorded
            and self._step_seq == state.seq
            and automatic
        ):
            # Only a model call follows: it goes on while this commit is on the wire.
            task = asyncio.ensure_future(
                self.store.append(
                    state.run_id,
                    written,
                    expected_seq=before,
                    epoch=self.epoch,
                    status=_VALUES[state.status],
                    now=self.clock(),
                    sync=sync,
                )
            )
            task.add_done_callback(_quiet)
            self._ahead = _Ahead(task, events, len(written), sync)
            if self.on_commit is not None and batch:
                self.on_commit(state, batch)
            return state
        try:
            await self.store.append(
                state.run_id,
                written,
                expected_seq=before,
                epoch=self.epoch,
                status=_VALUES[state.status],
                now=self.clock(),
                snapshot=snapshot,
                sync=sync,
            )
        except Fenced as exc:
            await self._reread()
            if not self.leased:  # the run was claimed meanwhile: write at its new epoch
                self.epoch = (await self.store.get_run(state.run_id)).epoch
                raise _Stale() from exc
            self.fenced = True
            raise
        except Conflict as exc:
            await self._reread()
            if written is not batch:  # events were held: lost, as in a crash
                self.rewinds += 1
                raise Rewound(
                    f"run {state.run_id}: another writer appended; the {len(written) - len(batch)}"
                    " event(s) held in memory are dropped and the state read again"
                ) from exc
            if self.state.seq != before:
                raise _Stale() from exc
            raise
        except StoreError:
            await self._reread()
            raise
        except BaseException:
            await asyncio.shield(self._reread())
            raise
        if snapshot is not None:
            self._snapshot_seq = snapshot[0]
        if self.on_commit is not None and batch:
            self.on_commit(state, batch)
        return state
