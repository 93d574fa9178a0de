"""Progress from afar, in the store: a model call's text deltas from the executor performing
it to the run's owner (``runtime._far_progress``), through ``ledger_progress`` (migration
0005_progress).

Provisional and lossy, as progress is everywhere (``core.progress``): the executor writes
batches of deltas without waiting for the disk (a crash may lose the last ones; the call's
settled message is what counts), the owner reads what came after the sequence it last saw
while it waits for the settle, and deletes the key's frames once the call settled. Sequence
numbers are the executor's, from 0 with no holes, so a reader sees any it missed.
"""

from __future__ import annotations

from collections.abc import Sequence

from stead.store.ledger._ledger import Ledger

INSERT = (
    "INSERT INTO ledger_progress (effect_id, seq, text, created_at) "
    "VALUES (?, ?, ?, ?) ON CONFLICT (effect_id, seq) DO NOTHING"
)
"""One frame, unless the key holds its sequence already."""


async def publish(
    ledger: Ledger, effect_id: str, first: int, texts: Sequence[str], *, now: float
) -> None:
    """Write ``texts`` as frames ``first``, ``first + 1``... of ``effect_id`` (unsynced);
    frames already there are kept (a retried write adds nothing twice)."""
    if not texts:
        return
    async with ledger._tx(sync=False) as s:
        if ledger.SKIP_FLUSH:
            await s.one(ledger.SKIP_FLUSH)
        for i, text in enumerate(texts):
            await s.run(ledger._q(INSERT), (effect_id, first + i, text, now))


async def frames(ledger: Ledger, effect_id: str, after: int) -> list[tuple[int, str]]:
    """The key's frames after sequence ``after`` (-1: all), in order."""
    async with ledger._reading() as s:
        rows = await s.all(
            ledger._q(
                "SELECT seq, text FROM ledger_progress WHERE effect_id = ? AND seq > ? ORDER BY seq"
            ),
            (effect_id, after),
        )
    return [(int(r[0]), str(r[1])) for r in rows]


async def forget(ledger: Ledger, effect_id: str) -> None:
    """Delete the key's frames (its call settled: the message is in the run's log)."""
    async with ledger._tx(sync=False) as s:
        await s.run(ledger._q("DELETE FROM ledger_progress WHERE effect_id = ?"), (effect_id,))
