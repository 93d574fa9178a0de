"""What a key becomes when the executor holding it can no longer perform it: it goes back to
the queue to run again, or it is settled here, by its class (``core.ledger.recovery_of``).

A holder is lost two ways, and both end here: its lease lapsed (it died or froze), and
another executor's claim takes the key over (``Ledger.claim``); or it is alive but holds the
key with no task running it (a write whose reply was lost; ``_strays``), and its own
heartbeat gives the key up.
"""

from __future__ import annotations

from typing import Any

from stead.core.ledger import LedgerState, Phase, recovery_of


def ending(
    phase: Phase, assignment: dict[str, Any], cancel: bool, why: str
) -> dict[str, Any] | None:
    """The outcome a key held in ``phase`` by a lost holder settles with, or None when it
    goes back to the queue and runs again. A non_idempotent tool that started may have
    happened: it settles ``tool_unknown`` (``why`` says what became of its holder), never
    run a second time; a key the run asked to cancel settles ``cancelled``."""
    tool = assignment.get("tool") or {}
    if recovery_of(LedgerState(phase=phase), tool.get("effect_class")) == "unknown":
        return {
            "kind": "tool_unknown",
            "reason": f"{why} while it ran this non_idempotent call; it may or may not "
            "have happened",
        }
    if cancel:
        return {"kind": "cancelled", "reason": "cancelled before it started"}
    return None
