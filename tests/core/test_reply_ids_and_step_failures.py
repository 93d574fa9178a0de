"""Replies and steps the log could not take as they were.

* Call ids are unique in the run: a reply with a repeated, empty or earlier-used id is
  recorded with deterministic new ids, so it never poisons the log and its idempotency keys
  never collide (``unique_call_ids``).
* A step that keeps failing is counted in the log (``step_failed``) and the
  ``max_step_failures``-th failure in a row fails the run with the evidence.
* Loop detection counts refused calls (unknown tool, bad arguments) too.
"""

from __future__ import annotations

import json

import pytest
from core_strategies import AWAITING_TWO, RUN_ID, RUNNING_T0, created, result, started

from stead.core.builders import (
    STEP_MESSAGE_LIMIT,
    CallAdmission,
    reply_events,
    step_failed_event,
    unique_call_ids,
)
from stead.core.canonical import idempotency_key
from stead.core.decide import (
    CallModel,
    Fail,
    RunTools,
    ToolSpec,
    Wait,
    automatic_events,
    next_step,
    step_label,
)
from stead.core.event_codec import decode, encode
from stead.core.events import (
    ApprovalRequested,
    Event,
    LoopDetected,
    RunCancelRequested,
    RunFailed,
    RunRecovered,
    StepFailed,
    ToolCallRequested,
    ToolResultRecorded,
    TurnStarted,
)
from stead.core.fold import RunState, fold
from stead.core.limits import Limits
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.core.states import RunStatus
from stead.errors import IllegalTransition, UserError


def _reply(*calls: tuple[str, str, str]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in calls),
        stop_reason="tool_use",
    )


def _verdicts(message: AssistantMessage, rejection: str | None = None) -> dict[str, CallAdmission]:
    return {
        c.id: CallAdmission(
            tool_call_id=c.id,
            arguments=c.arguments,
            effect_class=None if rejection else "idempotent_write",
            rejection=rejection,
        )
        for c in message.tool_calls
    }


def _turn(state: RunState, turn: int, message: AssistantMessage, **kw: object) -> list[Event]:
    """The intent of ``message`` as the run loop builds it: ids first, then verdicts."""
    message = unique_call_ids(state, turn, message)
    return reply_events(state, turn, message, Usage(), "m", _verdicts(message), **kw)  # type: ignore[arg-type]


def _requests(events: list[Event]) -> list[ToolCallRequested]:
    return [e for e in events if isinstance(e, ToolCallRequested)]


# -- ids unique in the run --------------------------------------------------------------------


def test_unique_ids_are_kept_as_they_are() -> None:
    state = fold(RUNNING_T0)
    message = _reply(("toolu_a", "t", "{}"), ("toolu_b", "t", "{}"))
    assert unique_call_ids(state, 0, message) is message
    keys = [r.idempotency_key for r in _requests(_turn(state, 0, message))]
    # The seed's formula where ids are unique.
    assert keys == [idempotency_key(RUN_ID, "toolu_a"), idempotency_key(RUN_ID, "toolu_b")]


def test_a_reply_with_one_id_twice_is_recorded_with_unique_ids() -> None:
    """Two calls named ``x`` made the intent raise IllegalTransition on every attempt (the
    run stayed running and every claimant billed the model again)."""
    state = fold(RUNNING_T0)
    message = _reply(("x", "t", '{"n":1}'), ("x", "t", '{"n":2}'), ("", "t", '{"n":3}'))
    events = _turn(state, 0, message)
    after = fold(events, start=state)  # the fold takes it
    recorded = after.last_assistant()
    assert recorded is not None
    assert [c.id for c in recorded.tool_calls] == ["x", "x_t0_1", "call_t0_2"]
    assert [c.arguments for c in recorded.tool_calls] == ['{"n":1}', '{"n":2}', '{"n":3}']
    assert list(after.calls) == ["x", "x_t0_1", "call_t0_2"]
    keys = {c.idempotency_key for c in after.calls.values()}
    assert len(keys) == 3


def test_renamed_ids_do_not_collide_with_ids_the_model_chose() -> None:
    state = fold(RUNNING_T0)
    message = _reply(("a", "t", "{}"), ("a", "t", "{}"), ("a_t0_1", "t", "{}"))
    fixed = unique_call_ids(state, 0, message)
    assert [c.id for c in fixed.tool_calls] == ["a", "a_t0_1", "a_t0_1_t0_2"]
    assert unique_call_ids(state, 0, fixed) is fixed  # a second pass changes nothing
    assert unique_call_ids(state, 0, message) == fixed  # deterministic


def test_an_id_reused_in_a_later_turn_gets_a_new_id_and_a_new_key() -> None:
    """Servers that number calls per reply send ``call_0`` in every turn: the two calls got
    one idempotency key, and a deduplicating API dropped the second write."""
    state = fold(RUNNING_T0)
    first = _reply(("call_0", "pay", '{"cents":100}'))
    state = fold(_turn(state, 0, first), start=state)
    state = fold([result(0, "call_0"), TurnStarted(turn_index=1)], start=state)
    second = _reply(("call_0", "pay", '{"cents":200}'), ("call_1", "pay", '{"cents":300}'))
    events = _turn(state, 1, second)
    after = fold(events, start=state)
    assert list(after.calls) == ["call_0_t1_0", "call_1"]
    key0 = idempotency_key(RUN_ID, "call_0")
    key1 = after.calls["call_0_t1_0"].idempotency_key
    assert key1 == idempotency_key(RUN_ID, "call_0_t1_0") != key0
    # The conversation the model reads next quotes the recorded ids on both sides.
    recorded = after.last_assistant()
    assert recorded is not None and [c.id for c in recorded.tool_calls] == list(after.calls)
    assert after.call_ids == {"call_0", "call_0_t1_0", "call_1"}


def test_reply_events_alone_make_the_ids_unique() -> None:
    """A caller that hands reply_events the raw reply (verdicts keyed by its ids) still gets
    a history the fold takes."""
    state = fold(RUNNING_T0)
    message = _reply(("x", "t", "{}"), ("x", "t", "{}"))
    events = reply_events(state, 0, message, Usage(), "m", _verdicts(message))
    after = fold(events, start=state)
    assert list(after.calls) == ["x", "x_t0_1"]


def test_call_ids_survive_a_snapshot() -> None:
    state = fold([*AWAITING_TWO])
    again = RunState.from_json(json.loads(json.dumps(state.to_json())))
    assert again.call_ids == state.call_ids == {"a", "b"}
    assert again == state


# -- loop detection counts refused calls ------------------------------------------------------


def test_a_refused_call_repeated_is_intercepted_as_a_loop() -> None:
    state = fold(RUNNING_T0)
    same = ("nope", '{"q":1}')
    message = _reply(("a", *same), ("b", *same), ("c", *same))
    verdicts = _verdicts(message, rejection="unknown tool 'nope'; available tools: t")
    events = reply_events(state, 0, message, Usage(), "m", verdicts, Limits(repeat_threshold=3))
    assert [e for e in events if isinstance(e, LoopDetected)] == [
        LoopDetected(turn_index=0, tool_call_id="c", name="nope", repeats=3)
    ]
    results = {e.tool_call_id: e for e in events if isinstance(e, ToolResultRecorded)}
    assert [results[c].source for c in "abc"] == ["rejected", "rejected", "loop"]
    # The model reads both why the call is refused and that it is looping.
    assert "unknown tool" in results["c"].content
    assert "3 times in a row" in results["c"].content
    fold(events, start=state)


def test_refused_calls_count_across_turns() -> None:
    state = fold(RUNNING_T0)
    bad = ("t", "not json")
    for turn in range(3):
        message = _reply((f"c{turn}", *bad))
        verdicts = _verdicts(message, rejection="arguments are not JSON")
        events = reply_events(state, turn, message, Usage(), "m", verdicts)
        loops = [e for e in events if isinstance(e, LoopDetected)]
        assert len(loops) == (1 if turn == 2 else 0)
        state = fold([*events, TurnStarted(turn_index=turn + 1)], start=state)


# -- step_failed ------------------------------------------------------------------------------


def _failed(step: str = "call_model (turn 0)", message: str = "boom") -> StepFailed:
    return StepFailed(step=step, error_type="RuntimeError", message=message)


TOOLS = {"t": ToolSpec(effect_class="read_only")}


def test_the_nth_failure_in_a_row_fails_the_run_with_the_evidence() -> None:
    limits = Limits(max_step_failures=3)
    state = fold([*RUNNING_T0, _failed(), _failed()])
    assert state.step_failures == 2
    assert next_step(state, TOOLS, limits) == CallModel(turn_index=0, turn_recorded=True, attempt=1)
    state = fold([_failed()], start=state)
    step = next_step(state, TOOLS, limits)
    assert isinstance(step, Fail)
    assert step.code == "step_failed" and step.phase == "runtime"
    assert step.details == {
        "step": "call_model (turn 0)",
        "error_type": "RuntimeError",
        "message": "boom",
        "failures": 3,
    }
    assert "3 times in a row" in step.message and "RuntimeError: boom" in step.message
    (failed,) = automatic_events(state, step)
    assert isinstance(failed, RunFailed) and failed.details == step.details
    end = fold([failed], start=state)
    assert end.status is RunStatus.FAILED
    assert end.error is not None and end.error["code"] == "step_failed"


def test_progress_resets_the_count_and_a_new_claimant_does_not() -> None:
    state = fold([*AWAITING_TWO, _failed("run_tools (turn 0)")])
    state = fold([RunRecovered(owner="w2", epoch=2, previous_owner="w1")], start=state)
    state = fold([_failed("run_tools (turn 0)")], start=state)
    assert state.step_failures == 2  # each claimant's failure counts
    state = fold([result(0, "a")], start=state)
    assert state.step_failures == 0 and state.last_step_failure is None
    assert isinstance(next_step(state, TOOLS, Limits(max_step_failures=1)), RunTools)


def test_a_run_waiting_on_a_person_rests_instead_of_failing() -> None:
    waiting = [
        *AWAITING_TWO,
        ApprovalRequested(turn_index=0, tool_call_id="a", reason="policy", token="tok"),
    ]
    state = fold(waiting)
    assert isinstance(next_step(state, TOOLS), RunTools)  # b runs while a waits
    state = fold([_failed("run_tools (turn 0)")] * 3, start=state)
    assert next_step(state, TOOLS) == Wait(status=RunStatus.AWAITING_APPROVAL)


def test_a_finished_run_has_no_step_to_fail() -> None:
    state = fold([*RUNNING_T0, RunFailed(code="internal_error", phase="runtime")])
    with pytest.raises(IllegalTransition):
        fold([_failed()], start=state)


def test_the_count_survives_a_snapshot() -> None:
    state = fold([*RUNNING_T0, _failed(), _failed()])
    again = RunState.from_json(json.loads(json.dumps(state.to_json())))
    assert again.step_failures == 2 and again.last_step_failure == _failed()
    assert again == state


def test_a_cancel_request_is_progress() -> None:
    state = fold([*RUNNING_T0, _failed(), _failed(), RunCancelRequested(reason="stop")])
    assert state.step_failures == 0


def test_step_failed_event_is_always_storable() -> None:
    class Odd(Exception):
        def __str__(self) -> str:
            raise ValueError("no text")

    event = step_failed_event("run_tools (turn 1)", RuntimeError("bad \ud800 \x00 " + "x" * 5000))
    assert event.error_type == "RuntimeError"
    assert len(event.message) <= STEP_MESSAGE_LIMIT
    assert "\x00" not in event.message
    event.message.encode("utf-8")  # no lone surrogate left
    kind, version, data = encode(event)
    assert decode(kind, version, json.loads(json.dumps(data))) == event
    assert "cannot be printed" in step_failed_event("s", Odd()).message


def test_step_label_names_the_kind_and_turn() -> None:
    state = fold([created(), started()])
    assert step_label(state, CallModel(turn_index=0, turn_recorded=False, attempt=1)) == (
        "call_model (turn 0)"
    )
    assert step_label(state, Fail(code="c", phase="p", message="m")) == "fail"


def test_max_step_failures_must_be_at_least_one() -> None:
    with pytest.raises(UserError):
        Limits(max_step_failures=0)
