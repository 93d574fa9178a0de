"""The run events of a takeover's recovery: the reconciler's verdicts (``effect_reconciled``)
and the redispatches, each accepted where it belongs and refused elsewhere, fenced by the
run owner's epoch (docs/adding-an-event.md, step 4)."""

from __future__ import annotations

from typing import Any

import pytest
from core_strategies import (
    AWAITING_TWO,
    COMPLETED,
    NI_STARTED,
    REPLIED,
    RUNNING_T0,
    result,
)

from stead.core.events import EffectReconciled, Event, RedispatchRecorded, RunRecovered, StepFailed
from stead.core.fold import apply, fold
from stead.errors import IllegalTransition


def verdict(turn: int = 0, call: str = "", epoch: int = 1, **kw: Any) -> EffectReconciled:
    fields: dict[str, Any] = {
        "observed": "missing",
        "verdict": "keep",
        "effect_id": "e1",
        "attempt": 1,
    }
    fields.update(kw)
    return EffectReconciled(turn_index=turn, tool_call_id=call, epoch=epoch, **fields)


def ledger(step: str = "planned", attempt: int = 1, epoch: int = 1, **kw: Any) -> Any:
    return RedispatchRecorded(effect_id="e1", step=step, attempt=attempt, epoch=epoch, **kw)  # type: ignore[arg-type]


TAKEN_OVER: list[Event] = [*NI_STARTED, RunRecovered(owner="w2", epoch=2, previous_owner="w1")]

ACCEPTED = [
    ("the turn's model call, no reply yet", RUNNING_T0, verdict()),
    ("a call of the current turn", AWAITING_TWO, verdict(call="a")),
    ("under the new owner's epoch", TAKEN_OVER, verdict(call="a", epoch=2, verdict="keep")),
    ("a planned redispatch", TAKEN_OVER, ledger(epoch=2)),
    ("its dispatch", TAKEN_OVER, ledger("dispatched", epoch=2)),
    ("giving up", TAKEN_OVER, ledger("given_up", 0, epoch=2, reason="budget")),
]


@pytest.mark.parametrize(
    ("prefix", "event"), [a[1:] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED]
)
def test_accepted_and_nothing_moves(prefix: list[Event], event: Event) -> None:
    state = fold(prefix)
    status, calls = state.status, {k: (c.attempts, c.unknown) for k, c in state.calls.items()}
    apply(state, event)
    assert state.status is status
    assert {k: (c.attempts, c.unknown) for k, c in state.calls.items()} == calls


REFUSED = [
    ("a finished run", COMPLETED, verdict(), "finished run"),
    ("a stale owner's epoch", TAKEN_OVER, verdict(call="a", epoch=1), "not the owner's epoch"),
    ("a later epoch than the owner's", AWAITING_TWO, verdict(call="a", epoch=2), "epoch 2"),
    ("another turn", AWAITING_TWO, verdict(turn=1, call="a"), "not the current turn"),
    ("a call never requested", AWAITING_TWO, verdict(call="zz"), "never requested"),
    ("a settled call", [*AWAITING_TWO, result(0, "a")], verdict(call="a"), "already has"),
    ("a model call already answered", REPLIED, verdict(), "already has its reply"),
    ("a stale owner's ledger record", TAKEN_OVER, ledger(epoch=1), "not the owner's epoch"),
    ("a ledger record of a finished run", COMPLETED, ledger(), "finished run"),
    ("a planned attempt 0", TAKEN_OVER, ledger(attempt=0, epoch=2), "count an attempt"),
    ("given up with an attempt", TAKEN_OVER, ledger("given_up", 2, epoch=2), "given_up none"),
]


@pytest.mark.parametrize(
    ("prefix", "event", "match"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_refused_without_a_trace(prefix: list[Event], event: Event, match: str) -> None:
    state = fold(prefix)
    before = state.to_json()
    with pytest.raises(IllegalTransition, match=match):
        apply(state, event)
    assert state.to_json() == before


def test_a_dispose_verdict_is_the_disposal() -> None:
    # the model call: its attempt is spent, the turn's next call has a key of its own
    state = fold(RUNNING_T0)
    apply(state, verdict(verdict="dispose"))
    assert state.model_failures == 1
    # a read_only call (no start record): settled unknown at the attempt in flight
    state = fold(AWAITING_TWO)
    apply(state, verdict(call="a", verdict="dispose"))
    assert (state.calls["a"].attempts, state.calls["a"].unknown) == (1, True)
    # a started non_idempotent call: unknown at its attempt, nothing else
    state = fold(NI_STARTED)
    apply(state, verdict(call="a", verdict="dispose"))
    assert (state.calls["a"].attempts, state.calls["a"].unknown) == (1, True)
    # keep and defer change nothing
    for v in ("keep", "defer", "redispatch"):
        state = fold(NI_STARTED)
        apply(state, verdict(call="a", verdict=v))
        assert not state.calls["a"].unknown


@pytest.mark.parametrize(
    ("prefix", "event", "match"),
    [
        (RUNNING_T0, verdict(attempt=2), "not the model call in flight"),
        (AWAITING_TWO, verdict(call="a", attempt=2), "not the call's in flight"),
        (NI_STARTED, verdict(call="a", attempt=3), "not the call's in flight"),
    ],
)
def test_a_verdict_names_the_attempt_in_flight(
    prefix: list[Event], event: Event, match: str
) -> None:
    state = fold(prefix)
    before = state.to_json()
    with pytest.raises(IllegalTransition, match=match):
        apply(state, event)
    assert state.to_json() == before


def test_recovering_what_a_dead_owner_left_is_not_progress() -> None:
    """A step that fails in every owner is still bounded (Limits.max_step_failures): a new
    owner's verdicts and ledger records do not reset the count of failures in a row."""
    failed = StepFailed(step="run_tools (turn 0)", error_type="RuntimeError")
    state = fold([*AWAITING_TWO, failed, RunRecovered(owner="w2", epoch=2), failed])
    apply(state, verdict(call="a", epoch=2, verdict="dispose"))
    apply(state, ledger(epoch=2))
    assert state.step_failures == 2
