"""One task per Runtime that keeps every run it drives: renews their leases and hears, for
each, a cancel request another process wrote.

A task of its own per run (a heartbeat, a watcher) cost each run two tasks, and the watcher
polled its run's row every ``poll_interval`` of the store (four reads per ``watch_interval``
on SQLite): with a thousand runs in flight, tens of thousands of reads a second, whatever
the runs were doing. The keeper wakes every ``watch_interval`` (or third of the TTL, if that
is shorter); at each beat it reads each held run's row once (a cancel is heard within
``watch_interval``, as before) and renews the leases that would be late at the next beat
(every third of the TTL, as before, never later). It runs while it holds a run and ends
with the last one.

Errors are per run and what they were: a renewal the store refuses (``Fenced``: the run was
taken over) stops that run as fenced; a store that cannot answer (restarting, locked) is
asked again at the next beat, for the lease (it is still ours until it expires) and for the
watch alike.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from stead._signal import AbortSignal
from stead.core.events import RunCancelRequested
from stead.errors import Fenced, StoreError
from stead.runtime._session import RunSession
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
    session: RunSession
    signal: AbortSignal
    loop: asyncio.AbstractEventLoop
    seen: int
    """The last sequence looked at for a cancel request."""
    renew_at: float
    """Loop time of the next renewal."""


class Keeper:
    """The leases and cancel watches of the runs one Runtime drives."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._held: dict[str, _Held] = {}
        self._task: asyncio.Task[None] | None = None

    def hold(self, session: RunSession, signal: AbortSignal) -> None:
        """Keep ``session``'s run from now until ``drop``: its first renewal a third of the TTL
        from now, its first look for a cancel at the next beat."""
        loop = asyncio.get_running_loop()
        run_id = session.state.run_id
        due = loop.time() + self._host.lease_ttl / 3
        self._held[run_id] = _Held(session, signal, loop, session.durable_seq, due)
        task = self._task
        if task is None or task.done() or task.get_loop() is not loop:
            # A run of another (closed) loop never reached its ``drop``: not ours to renew.
            self._held = {k: h for k, h in self._held.items() if h.loop is loop}
            self._task = loop.create_task(self._keep())

    def drop(self, session: RunSession) -> None:
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
            held = [h for h in self._held.values() if not h.signal.aborted]
            if held:
                await asyncio.gather(*(self._beat(h, soon) for h in held))
        if self._task is asyncio.current_task():
            self._task = None

    async def _beat(self, held: _Held, soon: float) -> None:
        if soon > held.renew_at:
            await self._renew(held)
            held.renew_at = asyncio.get_running_loop().time() + self._host.lease_ttl / 3
        if not held.signal.aborted:
            await self._watch(held)

    async def _renew(self, held: _Held) -> None:
        host, session = self._host, held.session
        try:
            await host.store.renew(
                session.state.run_id,
                owner=host.owner,
                epoch=session.epoch,
                now=host.clock(),
                ttl=host.lease_ttl,
            )
        except Fenced:
            session.fenced = True
            held.signal.abort("lease lost: another worker took this run over")
        except StoreError as exc:
            log.warning(
                "renewing the lease of run %s failed (retrying): %s", session.state.run_id, exc
            )

    async def _watch(self, held: _Held) -> None:
        """One look for a cancel request another process appended. Our own appends advance
        the session before the store, so they never count: only another writer's do."""
        session = held.session
        run_id = session.state.run_id
        seen = max(held.seen, session.durable_seq)  # not the events it holds unwritten
        try:
            # The run's row, not ``wait_changed``: one read now, and on PostgreSQL no
            # LISTEN taken and given back at every beat.
            last = (await self._host.store.get_run(run_id)).last_seq
            if last > max(seen, session.durable_seq):
                for stored in await self._host.store.read_events(run_id, after=seen):
                    if isinstance(stored.event, RunCancelRequested):
                        held.signal.abort(stored.event.reason or "cancelled")
                        return
            held.seen = max(seen, last)
        except StoreError as exc:
            log.warning("watching run %s for cancel requests failed (retrying): %s", run_id, exc)
