"""Keys an executor holds with no task running them (strays), given up by its heartbeat.

A write whose reply was lost (the connection died after the server committed it: a claim, a
``started``), or a settle that failed for good, leaves a key held by a live executor that
does not know it holds it: its lease never lapses, so no other executor takes the key over,
and nobody settles it. The pool's heartbeat compares the keys the ledger says it holds with
the tasks it runs and hands each stray here, which does what a takeover after a lapsed lease
does (``_recovery.ending``): the key goes back to the queue (``restarted``) and runs again,
or it is settled ``tool_unknown`` (a non_idempotent tool that started: it may have happened)
or ``cancelled`` (the run asked). Each write names the holder and its epoch in its own
``WHERE``, so a key that moved on meanwhile (settled, taken over) is left as it is.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from stead.core.ledger import LedgerEvent
from stead.store.ledger._ledger import Change, Ledger
from stead.store.ledger._recovery import ending

_HELD = "phase = ? AND epoch = ? AND executor = ?"


async def give_up(
    ledger: Ledger, executor: str, effect_ids: Collection[str], *, now: float
) -> dict[str, str]:
    """Recover each of ``effect_ids`` that ``executor`` still holds, in one transaction;
    what became of each (``restarted``, or the kind of the outcome it settled with)."""
    ids = sorted(effect_ids)
    if not ids:
        return {}
    out: dict[str, str] = {}
    why = f"executor {executor} held it with no task running it"
    async with ledger._tx() as s:
        rows = await s.all(
            ledger._q(
                "SELECT effect_id, phase, epoch, assignment, cancel FROM ledger_keys "
                "WHERE executor = ? AND phase IN ('claimed', 'started') "
                f"AND effect_id IN ({', '.join('?' * len(ids))})"
            ),
            (executor, *ids),
        )
        for effect_id, phase, epoch, text, cancel in rows:
            held = (phase, int(epoch), executor)
            outcome = ending(phase, json.loads(text), bool(cancel), why)
            if outcome is None:
                back = LedgerEvent(kind="restarted", epoch=int(epoch), reason=why)
                change = Change(
                    effect_id, back, "phase = 'accepted', epoch = epoch + 1, executor = NULL",
                    _HELD, held,
                )  # fmt: skip
            else:
                done = LedgerEvent(kind="settled", epoch=int(epoch), outcome=outcome)
                change = Change(
                    effect_id, done, "phase = 'settled', outcome = ?", _HELD,
                    (json.dumps(outcome), *held),
                )  # fmt: skip
            if await ledger._transition(s, change, now) is not None:
                out[effect_id] = "restarted" if outcome is None else outcome["kind"]
    return out
