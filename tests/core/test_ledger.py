"""The execution ledger's fold (core/ledger.py): every transition, accepted or refused.

The table is the contract the stores' conditional writes implement in SQL
(tests/store/test_ledger_store.py holds them to it): a row per (state reached by a prefix of
events, next event) with the phase it leads to, or the refusal it meets.
"""

from __future__ import annotations

import itertools

import pytest

from stead.core.ledger import (
    LedgerEvent,
    LedgerRefused,
    LedgerState,
    attachment_of,
    fold,
    recovery_of,
    refusal,
    step,
)

OUT = {"kind": "tool_succeeded", "content": "ok"}


def ev(kind: str, **kw: object) -> LedgerEvent:
    return LedgerEvent(kind=kind, **kw)  # type: ignore[arg-type]


ACCEPTED = [ev("accepted")]
CLAIMED = [*ACCEPTED, ev("claimed", executor="x", epoch=1)]
STARTED = [*CLAIMED, ev("started", epoch=1)]
RESTARTED = [*STARTED, ev("restarted", epoch=1, reason="lease lapsed")]
SETTLED = [*STARTED, ev("settled", epoch=1, outcome=OUT)]
ACKED = [*SETTLED, ev("acknowledged")]
ABORTED = [ev("aborted")]

TABLE: list[tuple[str, list[LedgerEvent], LedgerEvent, str]] = [
    # (name, before, event, phase after | "refused: <words of the reason>")
    ("accept a new key", [], ev("accepted"), "accepted"),
    ("abort a new key", [], ev("aborted"), "aborted"),
    ("claim a new key", [], ev("claimed", executor="x", epoch=1), "refused: never accepted"),
    ("settle a new key", [], ev("settled", outcome=OUT), "refused: never accepted"),
    ("accept twice", ACCEPTED, ev("accepted"), "refused: already accepted or aborted"),
    ("abort after accept", ACCEPTED, ev("aborted"), "refused: already accepted or aborted"),
    ("accept after abort", ABORTED, ev("accepted"), "refused: tombstone"),
    ("claim after abort", ABORTED, ev("claimed", executor="x", epoch=1), "refused: tombstone"),
    ("cancel after abort", ABORTED, ev("cancel_requested"), "refused: tombstone"),
    ("claim", ACCEPTED, ev("claimed", executor="x", epoch=1), "claimed"),
    ("claim with no executor", ACCEPTED, ev("claimed", epoch=1), "refused: names its executor"),
    ("claim at an old epoch", ACCEPTED, ev("claimed", executor="x", epoch=0), "refused: newer"),
    ("claim a held key", CLAIMED, ev("claimed", executor="y", epoch=2), "refused: is held"),
    ("start", CLAIMED, ev("started", epoch=1), "started"),
    ("start at a stale epoch", CLAIMED, ev("started", epoch=0), "refused: stale"),
    ("start twice", STARTED, ev("started", epoch=1), "refused: only a claimed key"),
    ("start an unclaimed key", ACCEPTED, ev("started", epoch=0), "refused: only a claimed"),
    ("settle a started key", STARTED, ev("settled", epoch=1, outcome=OUT), "settled"),
    ("settle a claimed key", CLAIMED, ev("settled", epoch=1, outcome=OUT), "settled"),
    ("owner settles an unheld key", ACCEPTED, ev("settled", outcome=OUT), "settled"),
    ("settle at a stale epoch", STARTED, ev("settled", epoch=0, outcome=OUT), "refused: stale"),
    ("settle with no outcome", STARTED, ev("settled", epoch=1), "refused: carries its outcome"),
    ("settle twice", SETTLED, ev("settled", epoch=1, outcome=OUT), "refused: has settled"),
    ("release a claimed key", CLAIMED, ev("restarted", epoch=1), "accepted"),
    ("restart a started key", STARTED, ev("restarted", epoch=1), "accepted"),
    ("restart at a stale epoch", STARTED, ev("restarted", epoch=2), "refused: stale"),
    ("restart an unheld key", ACCEPTED, ev("restarted", epoch=0), "refused: only a held"),
    ("zombie settles after restart", RESTARTED, ev("settled", epoch=1, outcome=OUT), "refused"),
    ("zombie starts after restart", RESTARTED, ev("started", epoch=1), "refused: stale"),
    ("claim again after restart", RESTARTED, ev("claimed", executor="y", epoch=3), "claimed"),
    ("cancel an accepted key", ACCEPTED, ev("cancel_requested"), "accepted"),
    ("cancel a started key", STARTED, ev("cancel_requested"), "started"),
    ("cancel twice", [*STARTED, ev("cancel_requested")], ev("cancel_requested"), "refused"),
    ("cancel a settled key", SETTLED, ev("cancel_requested"), "refused: has settled"),
    ("acknowledge", SETTLED, ev("acknowledged"), "acknowledged"),
    ("acknowledge an open key", STARTED, ev("acknowledged"), "refused: only a settled"),
    ("acknowledge twice", ACKED, ev("acknowledged"), "refused: only a settled"),
    ("settle after acknowledged", ACKED, ev("settled", epoch=1, outcome=OUT), "refused"),
]


@pytest.mark.parametrize(
    ("before", "event", "expect"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE]
)
def test_transition(before: list[LedgerEvent], event: LedgerEvent, expect: str) -> None:
    state = fold(before)
    if expect.startswith("refused"):
        words = expect.removeprefix("refused").lstrip(": ")
        assert refusal(state, event) is not None
        with pytest.raises(LedgerRefused, match=words or "refused"):
            step(state, event)
    else:
        after = step(state, event)
        assert after.phase == expect
        assert after.position == state.position + 1


def test_restart_moves_the_epoch_past_the_holder_it_ends() -> None:
    """The fencing that makes a zombie's settle fail: once back in the queue the key is at
    an epoch no holder had, so neither the old holder nor a stale owner write lands."""
    state = fold(RESTARTED)
    assert (state.phase, state.epoch, state.executor, state.restarts) == ("accepted", 2, None, 1)
    again = fold([*RESTARTED, ev("claimed", executor="y", epoch=3), ev("started", epoch=3)])
    assert (again.executor, again.epoch, again.started) == ("y", 3, 2)


def test_fold_keeps_the_outcome_and_cancel_request() -> None:
    state = fold([*STARTED, ev("cancel_requested"), ev("settled", epoch=1, outcome=OUT)])
    assert state.outcome == OUT and state.cancel_requested and state.position == 5


ALPHABET = [
    ev("accepted"),
    ev("aborted"),
    ev("claimed", executor="x", epoch=1),
    ev("claimed", executor="y", epoch=3),
    ev("started", epoch=1),
    ev("started", epoch=3),
    ev("restarted", epoch=1),
    ev("settled", epoch=1, outcome=OUT),
    ev("settled", epoch=3, outcome=OUT),
    ev("settled", epoch=2, outcome=OUT),
    ev("cancel_requested"),
    ev("acknowledged"),
]


def test_every_sequence_keeps_the_invariants() -> None:
    """Every sequence of up to 4 events from the alphabet: the first accepted event is the
    origin, one of accepted/aborted, and never both; nothing follows a tombstone; at most one
    settle; epochs never go back; a settle only lands under the latest epoch."""
    for n in range(1, 5):
        for seq in itertools.product(ALPHABET, repeat=n):
            state = LedgerState()
            kinds: list[str] = []
            for e in seq:
                if refusal(state, e) is not None:
                    continue
                before = state
                state = step(state, e)
                kinds.append(e.kind)
                assert state.epoch >= before.epoch
                if e.kind == "settled":
                    assert e.epoch == before.epoch
            if kinds:
                assert kinds[0] in ("accepted", "aborted")
                assert kinds.count("accepted") + kinds.count("aborted") == 1
                assert kinds.count("settled") <= 1
                if kinds[0] == "aborted":
                    assert kinds == ["aborted"]


@pytest.mark.parametrize(
    ("phase", "live", "expect"),
    [
        ("none", True, "missing"),
        ("aborted", True, "aborted"),
        ("accepted", False, "active"),
        ("claimed", True, "active"),
        ("started", True, "active"),
        ("claimed", False, "orphaned"),
        ("started", False, "orphaned"),
        ("settled", False, "terminal"),
        ("acknowledged", True, "terminal"),
    ],
)
def test_attachment(phase: str, live: bool, expect: str) -> None:
    assert attachment_of(phase, live) == expect  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("phase", "effect_class", "expect"),
    [
        ("claimed", "non_idempotent", "restart"),  # never started: nothing happened
        ("started", "non_idempotent", "unknown"),  # may have happened: never twice
        ("started", "idempotent_write", "restart"),
        ("started", "read_only", "restart"),
        ("started", None, "restart"),  # a model call
    ],
)
def test_recovery_of_an_orphan(phase: str, effect_class: str | None, expect: str) -> None:
    assert recovery_of(LedgerState(phase=phase), effect_class) == expect  # type: ignore[arg-type]
