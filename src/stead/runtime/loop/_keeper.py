"""One task per Runtime that keeps every run it drives: renews their leases and hears, for
each, a cancel request another process wrote.

A task of its own per run (a heartbeat, a watcher) cost each run two tasks, and the watcher
polled its run's row every ``poll_interval`` of the store (four reads per ``watch_interval``
on SQLite): with a thousand runs in flight, tens of thousands of reads a second, whatever
the runs were doing. The keeper wakes every ``watch_interval`` (or third of the TTL, if that
is shorter); at each beat it reads the last sequence of every held run in one read
(``Store.last_seqs``: a cancel is heard within ``watch_interval``, as before) and renews the
leases that would be late at the next beat in one write (``Store.renew_leases``; every third
of the TTL, as before, never later). A read and a write per run and beat were, on PostgreSQL
with a hundred runs in flight, five hundred statements a second, each a pool checkout, and
ten times that with a thousand. It runs while it holds a run and ends with the last one.

Errors are per run and what they were: a renewal the store refuses (the run was taken over)
stops that run as fenced, and only that run; a store that cannot answer (restarting, locked)
is asked again at the next beat, for the leases (they are still ours until they expire) and
for the watch alike.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from stead._lease import TAKEN, HeldLease
from stead._signal import AbortSignal
from stead.core.events import RunCancelRequested
from stead.errors import StoreError
from stead.runtime.loop._owned import OwnedRun
from stead.store import Store

log = logging.getLogger("stead.runtime")


class Host(Protocol):
    """What the keeper reads of its Runtime at every beat (tests change ``watch_interval``)."""

    store: Store
    owner: str
    lease_ttl: float
    watch_interval: float
    clock: Callable[[], float]


@dataclass(slots=True, eq=False)
class _Held:
    session: OwnedRun
    signal: AbortSignal
    loop: asyncio.AbstractEventLoop
    seen: int
    """The last sequence looked at for a cancel request."""
    renew_at: float
    """Loop time of the next renewal."""
    lease: HeldLease | None
    """The drive's local deadline, moved on by each renewal the store confirms."""


class Keeper:
    """The leases and cancel watches of the runs one Runtime drives."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._held: dict[str, _Held] = {}
        self._task: asyncio.Task[None] | None = None

    def hold(self, session: OwnedRun, signal: AbortSignal, lease: HeldLease | None = None) -> None:
        """Keep ``session``'s run from now until ``drop``: its first renewal a third of the TTL
        from now, its first look for a cancel at the next beat."""
        loop = asyncio.get_running_loop()
        run_id = session.state.run_id
        due = loop.time() + self._host.lease_ttl / 3
        self._held[run_id] = _Held(session, signal, loop, session.durable_seq, due, lease)
        if lease is not None:
            # The lease's deadline as a timer, from here: a drive that rests before the keeper
            # takes it (most turns) ends long before its lease could lapse.
            lease.arm()
        task = self._task
        if task is None or task.done() or task.get_loop() is not loop:
            # A run of another (closed) loop never reached its ``drop``: not ours to renew.
            self._held = {k: h for k, h in self._held.items() if h.loop is loop}
            self._task = loop.create_task(self._keep())

    def drop(self, session: OwnedRun) -> None:
        """Stop keeping ``session``'s run (its drive ended)."""
        held = self._held.get(session.state.run_id)
        if held is not None and held.session is session:
            del self._held[session.state.run_id]

    async def close(self) -> None:
        """Stop the task (the Runtime is closing)."""
        task, self._task = self._task, None
        if task is not None and not task.done() and task.get_loop().is_running():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _keep(self) -> None:
        loop = asyncio.get_running_loop()
        while self._held:
            # A beat at least every third of the TTL too: a lease shorter than three watch
            # intervals is still renewed in time.
            beat = min(self._host.watch_interval, self._host.lease_ttl / 3)
            await asyncio.sleep(beat)
            # Renew now what would be late at the next beat: never later than it is due.
            soon = loop.time() + beat
            due = [h for h in self._held.values() if not h.signal.aborted and soon > h.renew_at]
            if due:
                await self._renew(due)
            held = [h for h in self._held.values() if not h.signal.aborted]
            if held:
                await self._watch(held)
        if self._task is asyncio.current_task():
            self._task = None

    async def _renew(self, due: list[_Held]) -> None:
        """Every lease due, in one write of the store (one statement on PostgreSQL)."""
        host = self._host
        leases = [(h.session.state.run_id, h.session.epoch) for h in due]
        # Each lease counts from the send, never from the answer.
        sent = [0.0 if h.lease is None else h.lease.now() for h in due]
        try:
            # Bounded: a renewal stuck on a dead connection must not hold up the next beat
            # (each drive's own deadline fires regardless, HeldLease).
            async with asyncio.timeout(host.lease_ttl / 3):
                lost = set(
                    await host.store.renew_leases(
                        leases, owner=host.owner, now=host.clock(), ttl=host.lease_ttl
                    )
                )
        except (StoreError, TimeoutError) as exc:
            # Still ours until they expire: asked again at the next beat.
            log.warning("renewing the leases of %d runs failed (retrying): %r", len(due), exc)
            return
        next_at = asyncio.get_running_loop().time() + host.lease_ttl / 3
        for held, at in zip(due, sent, strict=True):
            if held.session.state.run_id in lost:
                held.session.fenced = True
                held.signal.abort(TAKEN)
                if held.lease is not None:
                    held.lease.lose(TAKEN)
            else:
                held.renew_at = next_at
                if held.lease is not None:
                    held.lease.confirmed(at)

    async def _watch(self, held: list[_Held]) -> None:
        """One look for a cancel request another process appended, for every run at once (one
        read of their last sequences). Our own appends advance the OwnedRun before the store,
        so they never count: only another writer's do."""
        store = self._host.store
        seen = [max(h.seen, h.session.durable_seq) for h in held]
        try:
            # The runs' rows, not ``wait_changed``: one read now, and on PostgreSQL no
            # LISTEN taken and given back at every beat.
            lasts = await store.last_seqs([h.session.state.run_id for h in held])
        except StoreError as exc:
            log.warning(
                "watching %d runs for cancel requests failed (retrying): %s", len(held), exc
            )
            return
        for h, before in zip(held, seen, strict=True):
            run_id = h.session.state.run_id
            last = lasts.get(run_id, 0)
            if last > max(before, h.session.durable_seq):
                try:
                    events = await store.read_events(run_id, after=before)
                except StoreError as exc:
                    log.warning(
                        "watching run %s for cancel requests failed (retrying): %s", run_id, exc
                    )
                    continue
                cancel = next(
                    (e.event for e in events if isinstance(e.event, RunCancelRequested)), None
                )
                if cancel is not None:
                    h.signal.abort(cancel.reason or "cancelled")
                    continue
            h.seen = max(before, last)
