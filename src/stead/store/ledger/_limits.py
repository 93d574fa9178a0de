"""Fleet-wide queue limits of the execution ledger: at most N effects of a queue held at once
across every executor, and a pause every executor honours after a ``rate_limited`` answer.

A queue's row in ``queue_limits`` (migration 0004_ledger) holds its limit and the time until
which it is paused. A claim reads the row locked (``FOR UPDATE`` on PostgreSQL; SQLite's
``BEGIN IMMEDIATE`` already serialises claims), counts the queue's keys held under live
leases, and takes at most the difference, in the same transaction: so two executors claiming
at once cannot both see room for the last slot. A held key counts until it settles or its
executor's lease lapses (then it is taken over, and counted again under its new holder).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from stead.store.sql import Session


class _Ledger(Protocol):
    """What a queue's limits need of the execution ledger (which calls ``room`` itself)."""

    @property
    def LOCK_LIMIT(self) -> str: ...

    def _q(self, text: str) -> str: ...

    def _tx(self, *, sync: bool = True) -> AbstractAsyncContextManager[Session]: ...


_LIVE = (
    "EXISTS (SELECT 1 FROM executors x WHERE x.executor_id = k.executor AND x.lease_expires_at > ?)"
)


async def room(ledger: _Ledger, s: Session, queue: str, now: float, wanted: int) -> int:
    """How many keys of ``queue`` a claim may take now (at most ``wanted``): none while the
    queue is paused; the limit less those held under live leases when it has one."""
    row = await s.one(
        ledger._q(
            f"SELECT max_concurrent, paused_until FROM queue_limits WHERE queue = ?"
            f"{ledger.LOCK_LIMIT}"
        ),
        (queue,),
    )
    if row is None:
        return wanted
    limit, paused_until = row
    if paused_until is not None and paused_until > now:
        return 0
    if limit is None:
        return wanted
    held = await s.one(
        ledger._q(
            "SELECT COUNT(*) FROM ledger_keys k WHERE k.queue = ? "
            f"AND k.phase IN ('claimed', 'started') AND {_LIVE}"
        ),
        (queue, now),
    )
    return max(0, min(wanted, int(limit) - int(held[0] if held else 0)))


async def set_limit(ledger: _Ledger, queue: str, max_concurrent: int | None) -> None:
    """Hold ``queue`` to ``max_concurrent`` effects at once, fleet-wide (None: no limit).
    The last executor to start with a limit sets it for all."""
    async with ledger._tx() as s:
        await s.run(
            ledger._q(
                "INSERT INTO queue_limits (queue, max_concurrent, paused_until) VALUES (?, ?, 0) "
                "ON CONFLICT (queue) DO UPDATE SET max_concurrent = excluded.max_concurrent"
            ),
            (queue, max_concurrent),
        )


async def pause(ledger: _Ledger, queue: str, until: float) -> None:
    """No executor claims from ``queue`` before ``until`` (a provider said rate_limited);
    a later pause extends it, an earlier one does not shorten it."""
    async with ledger._tx() as s:
        await s.run(
            ledger._q(
                "INSERT INTO queue_limits (queue, max_concurrent, paused_until) "
                "VALUES (?, NULL, ?) ON CONFLICT (queue) DO UPDATE SET paused_until = CASE "
                "WHEN excluded.paused_until > queue_limits.paused_until "
                "THEN excluded.paused_until ELSE queue_limits.paused_until END"
            ),
            (queue, until),
        )
