"""The execution ledger of one effect, as data: its short event log and the fold over it.

The run log (one per run) and the execution ledger (one per effect key) are two event-sourced
authorities that refer to each other only through the assignment key. The ledger says what the
*executor side* knows: whether the key was accepted or aborted (exactly one of the two, ever:
the database enforces it with the key's primary key), who holds it under which fencing epoch,
whether it started, whether the run asked it to stop, and how it settled.

    accepted ─ claimed{executor, epoch} ─ started ─ settled{outcome} ─ acknowledged
        │           │    ▲                  │
        │           └ restarted{epoch} ◄────┘   (released, or its executor's lease lapsed:
        │                                          back to the queue under epoch + 1)
        └ settled (the owner settles a key no executor holds, e.g. cancelled before a claim)
    aborted (a tombstone: nothing follows it)
    cancel_requested: once, at any point before settled

Every write that needs a holder names its epoch; the fold refuses a stale one, and the stores
refuse it in the write's own statement (``stead.store.ledger._ledger``), so the two agree. The fold
is pure: no I/O, no clock (a lease's expiry is the store's business, ``attachment_of`` gets
the answer as a boolean).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, TypeAlias, get_args

LedgerKind: TypeAlias = Literal[
    "accepted",
    "aborted",
    "claimed",
    "started",
    "cancel_requested",
    "restarted",
    "settled",
    "acknowledged",
]
LEDGER_KINDS: Final[tuple[LedgerKind, ...]] = get_args(LedgerKind)
"""Every kind, in the order of ``LedgerKind`` (read from it, so the two cannot drift)."""

Phase: TypeAlias = Literal[
    "none", "accepted", "aborted", "claimed", "started", "settled", "acknowledged"
]
"""Where a key is: ``none`` before its first event."""

HELD: Final = frozenset({"claimed", "started"})
"""Phases in which an executor holds the key under a lease."""
OPEN: Final = frozenset({"accepted", "claimed", "started"})
"""Phases before the key settled: it may still be claimed, started, cancelled or settled."""

Attachment: TypeAlias = Literal["active", "orphaned", "terminal", "missing", "aborted"]
"""What an executor can say about a key (the reconciler's input)."""


class LedgerRefused(ValueError):
    """An event that does not follow from the key's state (a stale epoch, a second
    acceptance, a settle after a settle): the write it stands for changes nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEvent:
    """One event of a key's ledger."""

    kind: LedgerKind
    """What happened."""
    executor: str | None = None
    """``claimed``: who holds the key now."""
    epoch: int = 0
    """The holder's fencing epoch: claimed makes a new one; started, restarted and settled
    name the one they were written under."""
    outcome: dict[str, Any] | None = None
    """``settled``: the outcome's JSON."""
    reason: str = ""
    """``restarted``, ``cancel_requested``: why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerState:
    """A key's ledger, folded."""

    phase: Phase = "none"
    """Where it is."""
    executor: str | None = None
    """Who holds it (held phases), or held it last."""
    epoch: int = 0
    """The latest fencing epoch: a write under any other is stale."""
    position: int = 0
    """Events folded: the ledger position a settlement notice names."""
    started: int = 0
    """How many times the effect started (more than once only after a restart)."""
    restarts: int = 0
    """How many times it went back to the queue."""
    cancel_requested: bool = False
    """Whether the run asked it to stop."""
    outcome: dict[str, Any] | None = field(default=None)
    """How it settled (JSON), once settled."""


def step(state: LedgerState, event: LedgerEvent) -> LedgerState:
    """The state after ``event``; ``LedgerRefused`` saying why when it does not follow."""
    why = refusal(state, event)
    if why is not None:
        raise LedgerRefused(f"ledger {event.kind} refused in phase {state.phase}: {why}")
    moved = replace(state, position=state.position + 1)
    kind = event.kind
    if kind in ("accepted", "aborted"):
        return replace(moved, phase=kind)
    if kind == "claimed":
        return replace(moved, phase="claimed", executor=event.executor, epoch=event.epoch)
    if kind == "started":
        return replace(moved, phase="started", started=state.started + 1)
    if kind == "restarted":
        # Back to the queue under a new epoch: the holder it leaves is fenced out at once,
        # before anyone claims the key again.
        return replace(
            moved, phase="accepted", executor=None, epoch=state.epoch + 1,
            restarts=state.restarts + 1,
        )  # fmt: skip
    if kind == "cancel_requested":
        return replace(moved, cancel_requested=True)
    if kind == "settled":
        return replace(moved, phase="settled", outcome=event.outcome)
    return replace(moved, phase="acknowledged")


def refusal(state: LedgerState, event: LedgerEvent) -> str | None:
    """Why ``event`` cannot follow ``state``, or None when it can. The stores' conditional
    writes say the same in SQL; tests/core/test_ledger.py holds the two to this table."""
    phase, kind = state.phase, event.kind
    if phase == "aborted":
        return "the key is aborted (a tombstone): nothing follows it"
    if kind in ("accepted", "aborted"):
        return None if phase == "none" else "the key was already accepted or aborted"
    if phase == "none":
        return "the key was never accepted"
    if kind == "acknowledged":
        return None if phase == "settled" else "only a settled outcome is acknowledged"
    if phase not in OPEN:
        return "the key has settled"
    if kind == "cancel_requested":
        return "a cancel was already requested" if state.cancel_requested else None
    if kind == "claimed":
        if phase != "accepted":
            return "the key is held; it goes back to the queue (restarted) before a new claim"
        if not event.executor:
            return "a claim names its executor"
        return None if event.epoch > state.epoch else "a claim makes a newer epoch"
    if event.epoch != state.epoch:
        return f"epoch {event.epoch} is stale (the key is at epoch {state.epoch})"
    if kind == "started":
        return None if phase == "claimed" else "only a claimed key starts"
    if kind == "restarted":
        return None if phase in HELD else "only a held key goes back to the queue"
    if event.outcome is None:  # settled
        return "a settle carries its outcome"
    return None


def fold(events: Iterable[LedgerEvent]) -> LedgerState:
    """The state of a key after its events, from the start; ``LedgerRefused`` when one does
    not follow (a log the stores cannot have written)."""
    state = LedgerState()
    for e in events:
        state = step(state, e)
    return state


def attachment_of(phase: Phase, lease_live: bool) -> Attachment:
    """What an executor says about a key in ``phase``: held under a lease that lapsed is
    orphaned (its executor died or froze); ``lease_live`` is the store's reading of it."""
    if phase == "none":
        return "missing"
    if phase == "aborted":
        return "aborted"
    if phase in ("settled", "acknowledged"):
        return "terminal"
    if phase in HELD and not lease_live:
        return "orphaned"
    return "active"


def recovery_of(state: LedgerState, effect_class: str | None) -> Literal["restart", "unknown"]:
    """What an executor taking a held key over from a lapsed lease does: an effect that never
    started, or may run twice (model calls, read_only, idempotent_write), runs again; a
    non_idempotent tool that started may have happened, so it settles ``tool_unknown``
    rather than run a second time."""
    if state.phase == "started" and effect_class == "non_idempotent":
        return "unknown"
    return "restart"
