"""The execution ledger's SQLite half (``stead.store.ledger._ledger`` holds the rest).

SQLite has no notices, so both sides of a pool's handoff poll, and a poll's interval is
latency added to each call: the owner waiting for a settle, the executor waiting for work.
Both read fast after something happened and back off while nothing does. A read is a
fraction of a millisecond and takes no lock (the store is in WAL mode); a claim is a write
transaction, so the executor reads for work first and claims when it sees some.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from stead.errors import StoreError
from stead.store.ledger import OPEN, SETTLE_MARK, Claimed, Ledger

_MARK = f"SELECT {SETTLE_MARK}, position FROM ledger_keys WHERE effect_id = ?"
_WORK = (
    f"SELECT 1 FROM ledger_keys WHERE phase IN {OPEN} AND phase = 'accepted' "
    "AND queue IN ({}) LIMIT 1"
)
"""Whether a queue has an accepted key (``ledger_open``'s condition, so its index serves)."""
_FIRST = 0.001


class SQLiteLedger(Ledger):
    """SQLite: ``BEGIN IMMEDIATE`` (the store's write transaction) holds the one write lock
    from a claim's select to its updates; waiters poll."""

    _step = _FIRST
    """How long the executor's next look for work waits (``wait_work``)."""

    async def wait_settled(self, effect_id: str, run_id: str, timeout: float) -> int:  # noqa: ASYNC109
        """Read the key now, after 1 ms, then half as late again each time, up to the poll
        interval, and after 1 ms again whenever it moved on (its claim or start: its settle
        is near). Most effects settle within milliseconds; a waiter that only polled at the
        interval would add all of it to each. ``StoreExecutor`` shares one wait among a
        key's waiters."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        step, seen = _FIRST, 0
        while True:
            if self.watch.closed:  # each sleep is at most the poll interval
                raise StoreError(f"stopped waiting for {effect_id}: the watcher was closed")
            async with self._reading() as s:
                row = await s.one(_MARK, (effect_id,))
            if row is None:
                raise KeyError(f"effect {effect_id} was never dispatched to the ledger")
            left = deadline - loop.time()
            if row[0] or left <= 0:
                return int(row[0])
            if seen and row[1] != seen:
                step = _FIRST
            seen = row[1]
            await asyncio.sleep(min(step, left))
            step = min(step * 1.5, self.watch.poll_interval)

    async def wait_work(self, queues: Sequence[str], timeout: float) -> None:  # noqa: ASYNC109
        """Until a queue has an accepted key, or ``timeout`` (the executor then claims, which
        also finds orphaned keys). Reads after 1 ms, then half as late again each time;
        from 1 ms again once a claim took something: a run's next effect tends to come
        right after its last one settled. An idle executor reads once per ``timeout``.
        Without this, each call waited for the executor's next poll: the poll's phase, not
        the work, set the latency."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        query = _WORK.format(", ".join("?" * len(queues)))
        while True:
            left = deadline - loop.time()
            if left <= 0:
                return
            await asyncio.sleep(min(self._step, left))
            self._step = min(self._step * 1.5, max(timeout, _FIRST))
            async with self._reading() as s:
                if await s.one(query, tuple(queues)) is not None:
                    return

    async def claim(
        self, executor: str, queues: Sequence[str], *, limit: int, now: float, start: bool = False
    ) -> list[Claimed]:
        out = await super().claim(executor, queues, limit=limit, now=now, start=start)
        if out:
            self._step = _FIRST
        return out
