"""Reading runs as a dashboard does: pages of runs, and one run followed live (its durable
events from the store, the provisional text this process streams for it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from stead.core.events import (
    AssistantMessageRecorded,
    TurnResumed,
    TurnStarted,
)
from stead.core.fold import RunState
from stead.core.progress import (
    START,
    ProgressFrame,
    ProgressRead,
    ProgressWindow,
)
from stead.core.states import FINISHED
from stead.errors import (
    StoreError,
    UserError,
)
from stead.runtime.agent import resolve_run_id
from stead.runtime.executors import share_key
from stead.runtime.loop import hydrate
from stead.store import (
    Ledger,
    RunRecord,
    Store,
    StoredEvent,
    ledger_for,
    shared_progress_frames,
)


class Following:
    """``Runtime.list_runs`` and ``Runtime.follow``."""

    store: Store
    progress: ProgressWindow
    _ledgers: dict[int, Ledger]

    def _ledger(self) -> Ledger:
        """The store's execution ledger, opened once (``StoreError`` for a store without
        one): where runs' streamed text is shared (``Runtime(share_progress=True)``)."""
        ledger = self._ledgers.get(id(self.store))
        if ledger is None:
            ledger = self._ledgers[id(self.store)] = ledger_for(self.store)
        return ledger

    if TYPE_CHECKING:

        async def state(self, run_id: str) -> RunState: ...

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
        # RunNotFound (or AmbiguousId, for the start of an id) before anything is yielded.
        run_id = await resolve_run_id(self.store, run_id)
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
        shared = _Shared(self, run_id)
        wake = self._follower_wake(run_id)
        aio = asyncio.get_running_loop()
        changed: asyncio.Task[int] | None = None
        last_yield = aio.time()
        try:
            while True:
                wake.clear()
                events = await hydrate(self.store, await self.store.read_events(run_id, seq))
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
                elif turn > replied and not self.progress.generation(run_id):
                    far = await shared.read(turn)  # streamed by another process, if shared
                    if far.frames:
                        yield far
                        progress = far
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
                wait = heartbeat - idle
                if turn > replied and shared.ledger is not None:
                    wait = min(wait, shared.every)  # a reply may stream in another process
                done, _ = await asyncio.wait(
                    {changed, woke}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
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


class _Shared:
    """A follower's reader of the text another process streams for the run and shares
    through the store (``Runtime(share_progress=True)``): the frames of the turn now
    streaming, after the last one read. A new stream of the turn (another attempt, or the
    process that took the run over streaming it again) is read from its first frame, the
    text read before declared void (a reset). Nothing for a store without a ledger."""

    every = 0.1
    """Seconds between reads while a reply streams."""

    def __init__(self, runtime: Following, run_id: str) -> None:
        self.run_id = run_id
        self.ledger: Ledger | None
        try:
            self.ledger = runtime._ledger()
        except StoreError:
            self.ledger = None
        self._turn = -1
        self._stream: str | None = None
        """The stream of the turn whose frames were read (None: none yet)."""
        self._last = -1
        self._generation = 1
        """Counts the streams read, as the frames' generation."""

    async def read(self, turn: int) -> ProgressRead:
        if self.ledger is None:
            return _NOTHING
        if turn != self._turn:
            self._turn, self._stream, self._last = turn, None, -1
        try:
            stream, fresh, got = await shared_progress_frames(
                self.ledger, share_key(self.run_id, turn), stream=self._stream, after=self._last
            )
        except StoreError:  # lossy by design: the recorded reply is what counts
            return _NOTHING
        if not got:
            return _NOTHING
        reset = fresh and self._last >= 0  # the text read of the turn so far is void
        if reset:
            self._generation += 1
        self._stream, self._last = stream, got[-1][0]
        frames = tuple(
            ProgressFrame(
                run_id=self.run_id, turn_index=turn, generation=self._generation, sequence=n, text=t
            )
            for n, t in got
        )
        return ProgressRead(frames=frames, reset=reset, gap=False, cursor=START)


_NOTHING = ProgressRead(frames=(), reset=False, gap=False, cursor=START)
