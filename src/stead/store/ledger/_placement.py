"""Where a run's effects ran, from the execution ledger (``stead effects list/show``).

The run's own log says what each effect did; the ledger says where: the queue it went to,
the executor that holds or last held it, the epoch of that hold, and every claim (each a new
epoch, by which executor), so a call restarted after its executor died shows both. An effect
the run performed in process has no key here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stead.store.ledger._ledger import Ledger, event_of


@dataclass(frozen=True, slots=True)
class Placement:
    """One effect key's place in the ledger."""

    effect_id: str
    phase: str
    """Accepted, claimed, started, settled, acknowledged, or aborted (a tombstone)."""
    queue: str | None
    executor: str | None
    """The executor that holds it or held it last (None before a claim and after a release)."""
    epoch: int
    claims: tuple[tuple[str, int], ...] = field(default=())
    """Every claim in order: (executor, epoch)."""

    @property
    def attempts(self) -> int:
        """How many times an executor took it (a restart after a lapsed lease is one more)."""
        return len(self.claims)


async def placements(ledger: Ledger, run_id: str) -> dict[str, Placement]:
    """Every key of ``run_id`` in the ledger, by effect id."""
    async with ledger._reading() as s:
        keys = await s.all(
            ledger._q(
                "SELECT effect_id, phase, queue, executor, epoch FROM ledger_keys "
                "WHERE run_id = ? ORDER BY created_at"
            ),
            (run_id,),
        )
        claimed = await s.all(
            ledger._q(
                "SELECT e.effect_id, e.kind, e.data FROM ledger_events e JOIN ledger_keys k "
                "ON k.effect_id = e.effect_id WHERE k.run_id = ? AND e.kind = 'claimed' "
                "ORDER BY e.effect_id, e.seq"
            ),
            (run_id,),
        )
    claims: dict[str, list[tuple[str, int]]] = {}
    for effect_id, kind, data in claimed:
        e = event_of(kind, data)
        claims.setdefault(effect_id, []).append((e.executor or "", e.epoch))
    return {
        k[0]: Placement(k[0], k[1], k[2], k[3], int(k[4]), tuple(claims.get(k[0], ())))
        for k in keys
    }
