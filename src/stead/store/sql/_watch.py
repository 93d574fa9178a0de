"""Waiting for runs to change, shared by the stores.

A notice (PostgreSQL ``LISTEN/NOTIFY``, or an append by this very store object) is only a
wake-up: it carries a run id and a position, never an outcome, and the woken waiter re-reads
the durable sequence. Notices can be lost (a dropped connection, a writer on another machine
of a backend that has none), so a poller also reads the sequences of every watched run, in
one query per interval. A lost notice therefore costs at most one poll interval.

    waiter:  read seq ─ changed? ─ yes → return it
                        no → sleep until woken (notice or poll) or the deadline, read again
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from stead.errors import RunNotFound, StoreError

log = logging.getLogger("stead.store")

ReadSeqs = Callable[[Sequence[str]], Awaitable[dict[str, int]]]
"""Reads the last sequence of each named run (absent runs are left out)."""


class _Waiter:
    """One ``wait_changed`` call: the sequence it waits past, and a future that a notice or
    the poller settles. A future and a timer, not an ``asyncio.Event`` and a task waiting on
    it: every run a worker holds has a waiter for its whole drive (its cancel watcher), and
    the event's deque and the task cost about 2 KiB a run more."""

    __slots__ = ("after", "seen", "woken")

    def __init__(self, after: int, loop: asyncio.AbstractEventLoop) -> None:
        self.after = after
        """Wake for sequences above this."""
        self.seen: int | None = None
        """What the poller read, so the waiter need not read again."""
        self.woken: asyncio.Future[None] = loop.create_future()
        """Settled by a notice or by the poller (a fresh one each round)."""

    def wake(self) -> None:
        """A notice or the poller: the run may have changed."""
        _settle(self.woken)


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Watcher:
    """Waiters on run sequences and on "a run may be claimable", fed by notices and a poll."""

    def __init__(
        self,
        read_seqs: ReadSeqs,
        *,
        poll_interval: float,
        on_watch: Callable[[str], None] | None = None,
        on_unwatch: Callable[[str], None] | None = None,
    ) -> None:
        """``on_watch(run_id)`` / ``on_unwatch(run_id)``: the first waiter on a run came, the
        last one left (a backend with notices listens to that run meanwhile)."""
        self._read = read_seqs
        self.poll_interval = poll_interval
        self._on_watch = on_watch
        self._on_unwatch = on_unwatch
        self._waiters: dict[str, set[_Waiter]] = {}
        self._poller: asyncio.Task[None] | None = None
        self._claimable: set[asyncio.Event] = set()
        self._claimable_pending = False
        self._heard: set[str] = set()
        """Runs whose every change is being heard (their channel is listened to)."""
        self._known: dict[str, int] = {}
        """Last sequence of heard runs, from a read since they were heard and the notices
        after it: a waiter on a heard run needs no read of its own."""
        self._closed = False
        """Set by ``close``: a waiter still here then ends (``StoreError``), as does one
        that comes later, instead of sleeping out its timeout on a watcher nobody feeds."""

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called (a backend that polls on its own ends its waits)."""
        return self._closed

    def watching(self, run_id: str) -> bool:
        """Whether anyone waits on ``run_id`` now."""
        return run_id in self._waiters

    # -- notices ----------------------------------------------------------------------------

    def changed(self, run_id: str, seq: int | None = None) -> None:
        """A notice that ``run_id`` changed (to ``seq``, if the notice says): wake its
        waiters. A heard run's ``seq`` is its truth (changes come in order, and every one
        after the run was heard is noticed), also while its first read is on the way: that
        read may have begun before the change, and must not hide it."""
        if seq is not None and (run_id in self._known or run_id in self._heard):
            self._known[run_id] = max(self._known.get(run_id, 0), seq)
        for w in self._waiters.get(run_id, ()):
            w.wake()

    def heard(self, run_ids: Iterable[str]) -> None:
        """From now on every change of these runs is noticed: wake their waiters to read
        once more, and trust that read plus the notices after it."""
        for run_id in run_ids:
            self._heard.add(run_id)
            self.changed(run_id)

    def forget(self, run_id: str) -> None:
        """Changes of ``run_id`` are no longer noticed."""
        self._heard.discard(run_id)
        self._known.pop(run_id, None)

    def changed_all(self) -> None:
        """Notices may have been lost (a reconnect): trust nothing, wake every waiter to
        re-read."""
        self._heard.clear()
        self._known.clear()
        for waiters in self._waiters.values():
            for w in waiters:
                w.wake()
        self.claimable()

    def claimable(self) -> None:
        """A notice that some run may have become claimable."""
        if not self._claimable:
            self._claimable_pending = True
        for ev in self._claimable:
            ev.set()

    # -- waiting ----------------------------------------------------------------------------

    async def wait_changed(self, run_id: str, after_seq: int, timeout: float) -> int:  # noqa: ASYNC109
        """See ``Store.wait_changed``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        w = _Waiter(after_seq, loop)
        if run_id not in self._waiters and self._on_watch is not None:
            self._on_watch(run_id)
        self._waiters.setdefault(run_id, set()).add(w)
        self._start_poller()
        try:
            while True:
                if self._closed:
                    raise StoreError(f"stopped waiting for {run_id}: the watcher was closed")
                if w.woken.done():
                    w.woken = loop.create_future()
                if w.seen is not None and w.seen > after_seq:
                    return w.seen
                known = self._known.get(run_id)
                seq = known if known is not None else await self._seq(run_id)
                remaining = deadline - loop.time()
                if seq > after_seq or remaining <= 0:
                    return seq
                timer = loop.call_later(remaining, _settle, w.woken)
                try:
                    await w.woken  # a cancellation of the caller cancels it and propagates
                finally:
                    timer.cancel()
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(w)
                if not waiters:
                    del self._waiters[run_id]
                    if self._on_unwatch is not None:
                        self._on_unwatch(run_id)

    async def wait_claimable(self, timeout: float) -> None:  # noqa: ASYNC109
        """See ``Store.wait_claimable``."""
        if self._claimable_pending:
            self._claimable_pending = False
            return
        ev = asyncio.Event()
        self._claimable.add(ev)
        try:
            await _until_set(ev, max(0.0, timeout))
        finally:
            self._claimable.discard(ev)

    async def _seq(self, run_id: str) -> int:
        heard = run_id in self._heard
        seqs = await self._read([run_id])
        if run_id not in seqs:
            raise RunNotFound(run_id)
        self._learn(run_id, seqs[run_id], heard)
        return seqs[run_id]

    def _learn(self, run_id: str, seq: int, heard: bool) -> None:
        """Remember a read of a run that was heard before the read began (and still is)."""
        if heard and run_id in self._heard:
            self._known[run_id] = max(self._known.get(run_id, 0), seq)

    # -- the poller -------------------------------------------------------------------------

    def _start_poller(self) -> None:
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._poll())

    async def _poll(self) -> None:
        """One batched read of every watched run per interval, while anyone waits."""
        while self._waiters:
            await asyncio.sleep(self.poll_interval)
            watched = list(self._waiters)
            if not watched:
                return
            heard = {r for r in watched if r in self._heard}
            try:
                seqs = await self._read(watched)
            except StoreError as exc:
                log.warning("polling run sequences failed (will retry): %s", exc)
                continue
            for run_id, seq in seqs.items():
                self._learn(run_id, seq, run_id in heard)
                for w in self._waiters.get(run_id, ()):
                    if seq > w.after:
                        w.seen = seq
                        w.wake()

    async def close(self) -> None:
        """Stop the poller, and wake every waiter still registered: each ends."""
        self._closed = True
        for waiters in self._waiters.values():
            for w in waiters:
                w.wake()
        for ev in self._claimable:
            ev.set()
        await stop_task(self._poller)
        self._poller = None


async def stop_task(task: asyncio.Task[Any] | None) -> None:
    """Cancel a background task of ours and wait until it has ended (``None``: nothing)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _until_set(event: asyncio.Event, seconds: float) -> None:
    """Wait for ``event`` or ``seconds``. Not ``asyncio.wait_for``: on Python 3.11 it loses a
    cancellation that arrives as the event is set, and a cancelled waiter must stop."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=seconds)
    finally:
        waiter.cancel()
