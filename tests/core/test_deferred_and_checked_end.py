"""Two decisions of the pure core an agent of another framework needs: a call whose tool
stopped without acting to ask a person (``tool_call_deferred``: not in flight, so a crash
never makes it unknown; an approval runs it again), and a final answer the agent checked
itself before the run ended (``checked_end_events``: accepted, or sent back as a retry)."""

from __future__ import annotations

import pytest

from stead.core.builders import (
    EndAccepted,
    EndRetry,
    checked_end_events,
    decision_events,
    deferred_events,
    started_event,
)
from stead.core.decide import RunTools, next_step, plan_call
from stead.core.events import (
    AssistantMessageRecorded,
    Event,
    NoticeInjected,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunStarted,
    ToolCallRequested,
    ToolResultRecorded,
    TurnStarted,
)
from stead.core.fold import RunState, apply, fold
from stead.core.limits import Limits
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.core.states import RunStatus
from stead.errors import IllegalTransition

SEND = ToolCall(id="c1", name="send", arguments='{"to":"ada"}')


def _called() -> list[Event]:
    return [
        RunCreated(run_id="r", agent="a", input="q"),
        RunStarted(owner="w", epoch=1),
        TurnStarted(turn_index=0),
        AssistantMessageRecorded(
            turn_index=0,
            message=AssistantMessage(text="", tool_calls=(SEND,), stop_reason="tool_use"),
            usage=Usage(input_tokens=3),
        ),
        ToolCallRequested(
            turn_index=0,
            tool_call_id="c1",
            name="send",
            arguments='{"to":"ada"}',
            effect_class="non_idempotent",
            idempotency_key="k",
        ),
    ]


def _started() -> RunState:
    state = fold(_called())
    apply(state, started_event(state, state.calls["c1"], 1))
    return state


def test_a_deferred_attempt_waits_on_a_person_and_is_not_in_flight() -> None:
    state = _started()
    assert state.calls["c1"].in_flight
    for e in deferred_events(state.calls["c1"], 1, "approval", "too big", "tok", None):
        apply(state, e)
    call = state.calls["c1"]
    assert state.status is RunStatus.AWAITING_APPROVAL
    assert call.deferred and not call.in_flight and call.attempts == 1
    assert state.approvals["c1"].reason == "policy"
    for e in decision_events(state, "c1", "approve", token="tok"):
        apply(state, e)
    step = next_step(state, {})
    assert isinstance(step, RunTools)
    (plan,) = step.plans
    assert (plan.action, plan.attempt) == ("execute", 2)
    apply(state, started_event(state, state.calls["c1"], 2))
    assert not state.calls["c1"].deferred and state.calls["c1"].in_flight


def test_a_call_handed_elsewhere_waits_on_an_answer() -> None:
    state = fold(_called())  # not start-recorded: the attempt is one more than none
    for e in deferred_events(state.calls["c1"], 1, "result", "", "tok", None):
        apply(state, e)
    assert state.approvals["c1"].reason == "question"
    for e in decision_events(state, "c1", "answer", token="tok", result="delivered"):
        apply(state, e)
    assert state.calls["c1"].result is not None
    assert state.calls["c1"].result.content == "delivered"


def test_after_a_timeout_and_a_resume_a_deferred_call_runs_again_not_reconciled() -> None:
    state = _started()
    for e in deferred_events(state.calls["c1"], 1, "approval", "", "tok", None):
        apply(state, e)
    state.approvals = {}  # what a time-out and a requeue leave of the wait
    assert plan_call(state.calls["c1"], None).action == "execute"


def test_a_deferral_of_a_settled_call_or_a_skipped_attempt_is_refused() -> None:
    state = _started()
    with pytest.raises(IllegalTransition, match="attempt 3 after 1"):
        apply(state, deferred_events(state.calls["c1"], 3, "approval", "", "t", None)[0])
    apply(state, ToolResultRecorded(turn_index=0, tool_call_id="c1", name="send", content="x"))
    with pytest.raises(IllegalTransition, match="settled"):
        apply(state, deferred_events(state.calls["c1"], 1, "approval", "", "t", None)[0])


TEXT = AssistantMessage(text="No.", stop_reason="end_turn")


def _replied(retries: int = 0) -> RunState:
    events: list[Event] = [
        RunCreated(run_id="r", agent="a", input="q"),
        RunStarted(owner="w", epoch=1),
        TurnStarted(turn_index=0),
    ]
    for n in range(retries):  # answers refused before, each a notice opening the next turn
        events += [
            AssistantMessageRecorded(turn_index=n, message=TEXT, usage=Usage()),
            TurnStarted(turn_index=n + 1),
            NoticeInjected(
                turn_index=n + 1,
                content="Your answer is not a valid final result. again",
                reason="output_invalid",
            ),
        ]
    return fold(events)


def test_an_accepted_answer_completes_with_the_agents_output() -> None:
    state = _replied()
    (done,) = checked_end_events(state, 0, TEXT, [], EndAccepted("NO."), Usage(), Limits())
    assert isinstance(done, RunCompleted) and done.output == "NO."


def test_a_refused_text_answer_opens_the_next_turn_with_the_reason_and_counts() -> None:
    state = _replied()
    got = checked_end_events(state, 0, TEXT, [], EndRetry("say please"), Usage(), Limits())
    assert [type(e) for e in got] == [TurnStarted, NoticeInjected]
    assert "say please" in got[1].content  # type: ignore[union-attr]
    spent = _replied(retries=3)
    (failed,) = checked_end_events(spent, 3, TEXT, [], EndRetry("no"), Usage(), Limits())
    assert isinstance(failed, RunFailed) and failed.code == "output_invalid"
    (gave_up,) = checked_end_events(state, 0, TEXT, [], EndRetry("x", last=True), Usage(), Limits())
    assert isinstance(gave_up, RunFailed)


def test_a_refused_final_result_is_its_calls_error_result() -> None:
    state = _replied()
    final = ToolCall(id="f1", name="final_result", arguments="{}")
    message = AssistantMessage(text="", tool_calls=(final,), stop_reason="tool_use")
    settled: list[Event] = [
        ToolResultRecorded(turn_index=0, tool_call_id="f1", name="final_result", content="ok"),
        RunCompleted(output="{}", stop_reason="final_result", data={}),
    ]
    (refused,) = checked_end_events(state, 0, message, settled, EndRetry("no"), Usage(), Limits())
    assert isinstance(refused, ToolResultRecorded)
    assert refused.is_error and refused.content == "no"
    accepted = checked_end_events(
        state, 0, message, settled, EndAccepted("{}", data={"a": 1}), Usage(), Limits()
    )
    assert isinstance(accepted[-1], RunCompleted) and accepted[-1].data == {"a": 1}
