"""A run's effects read from its log (``stead.core.effect_log``): one row per key, how each
ended, the reconciler's verdicts and the redispatches; and, on any valid log, every
effect in flight has a row in flight and every executed result a settled or failed one."""

from __future__ import annotations

from typing import Any

from core_strategies import (
    AWAITING_TWO,
    NI_STARTED,
    RUN_ID,
    RUNNING_T0,
    reply,
    request,
    result,
    run_logs,
)
from hypothesis import given, settings

from stead.core.canonical import effect_id
from stead.core.effect_log import effect_records
from stead.core.events import (
    EffectReconciled,
    Event,
    ModelCallFailed,
    RedispatchRecorded,
    RunRecovered,
    ToolResultRecorded,
)
from stead.core.fold import fold
from stead.core.reconcile import Redispatches, targets


def rows(events: list[Event]) -> list[tuple[str, int, str]]:
    return [
        (r.tool_call_id or "model", r.attempt, r.state)
        for r in effect_records(enumerate(events, 1))
    ]


def test_a_turn_with_a_failed_model_attempt_and_a_settled_call() -> None:
    log = [
        *RUNNING_T0,
        ModelCallFailed(turn_index=0, attempt=1, code="rate_limited"),
        reply(0, "a"),
        request(0, "a"),
        result(0, "a"),
    ]
    assert rows(log) == [("model", 1, "failed"), ("model", 2, "settled"), ("a", 1, "settled")]
    records = effect_records(enumerate(log, 1))
    assert records[0].detail == "rate_limited"
    assert records[2].effect_id == effect_id(RUN_ID, 0, "a", 1)


def test_what_is_in_flight_has_a_row_in_flight() -> None:
    assert rows(RUNNING_T0) == [("model", 1, "in_flight")]
    assert rows(AWAITING_TWO)[1:] == [("a", 1, "in_flight"), ("b", 1, "in_flight")]


def test_a_takeover_shows_its_verdicts_and_its_redispatches() -> None:
    key = effect_id(RUN_ID, 0, "a", 1)
    recovered = RunRecovered(owner="w2", epoch=2, previous_owner="w1")
    verdict = EffectReconciled(
        turn_index=0,
        tool_call_id="a",
        attempt=1,
        effect_id=key,
        observed="aborted",
        verdict="dispose",
        reason="its executor holds nothing for it",
        epoch=2,
    )
    planned = RedispatchRecorded(effect_id=key, step="planned", attempt=1, epoch=2)
    log = [*NI_STARTED, recovered, planned, verdict, result(0, "a", "approval", 1)]
    (model, call) = effect_records(enumerate(log, 1))
    assert (call.state, call.detail) == ("disposed", "its executor holds nothing for it")
    assert [v.verdict for v in call.verdicts] == ["dispose"]
    assert call.redispatch == Redispatches(planned=1)
    assert model.state == "settled"


def test_an_attempt_superseded_without_an_outcome_is_unknown() -> None:
    log = [*NI_STARTED, result(0, "a", "executed", 2)]  # attempt 2 ran; 1 never said
    assert rows(log)[1:] == [("a", 1, "unknown"), ("a", 2, "settled")]


@settings(max_examples=60, deadline=None)
@given(run_logs())
def test_every_valid_log_reads_as_effects(log: Any) -> None:
    events = log.events
    records = {r.effect_id: r for r in effect_records(enumerate(events, 1))}
    for t in targets(fold(events)):
        assert records[t.effect_id].state == "in_flight"
    for e in events:
        if isinstance(e, ToolResultRecorded) and e.source == "executed":
            key = effect_id(RUN_ID, e.turn_index, e.tool_call_id, e.attempt)
            assert records[key].state == ("failed" if e.is_error else "settled")
