"""What happens next: recovery plans (Guarantee 3), next steps, and the event builders."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections import Counter
from typing import Any

import pytest
from core_strategies import (
    A_DONE,
    AWAITING_TWO,
    BOTH_DONE,
    CANCELLED,
    COMPLETED,
    FAILED,
    NI_STARTED,
    POLICY_WAIT,
    REPLIED,
    RUN_ID,
    RUNNING_T0,
    TIMED_OUT,
    RunLog,
    ask,
    created,
    reply,
    request,
    result,
    run_logs,
    start,
    started,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.core.builders import (
    CallAdmission,
    Consent,
    ask_human_events,
    cancel_events,
    consent_events,
    decision_events,
    needs_start_record,
    reconcile_events,
    reply_events,
    started_event,
    timeout_events,
)
from stead.core.canonical import effect_id, idempotency_key
from stead.core.decide import (
    FINAL_TURN_NOTICE,
    CallModel,
    Cancel,
    Fail,
    Finish,
    ResumeTurn,
    RunTools,
    StartRun,
    ToolPlan,
    ToolSpec,
    Wait,
    after_opening,
    automatic_events,
    next_step,
    plan_call,
)
from stead.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageRecorded,
    Event,
    LoopDetected,
    ModelCallFailed,
    NoticeInjected,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunFailed,
    RunRequeued,
    RunTimedOut,
    ToolCallRequested,
    ToolCallStarted,
    ToolOutcomeUnknown,
    ToolReconciled,
    ToolResultRecorded,
    TurnResumed,
    TurnStarted,
)
from stead.core.fold import CallState, RunState, apply, fold
from stead.core.limits import Limits
from stead.core.messages import AssistantMessage, ToolCall, ToolResultMessage, Usage
from stead.core.states import FINISHED, RunStatus
from stead.errors import ApprovalError, IllegalTransition, UserError

WITH_RECONCILE = ToolSpec(effect_class="non_idempotent", has_reconcile=True)
WITHOUT_RECONCILE = ToolSpec(effect_class="non_idempotent")

# -- plan_call: Guarantee 3 ------------------------------------------------------------------


def call_state(
    effect: Any,
    attempts: int = 0,
    verdict: str | None = None,
    decision: Any = None,
    unknown: bool = False,
    gated: bool = False,
) -> CallState:
    return CallState(
        turn_index=0,
        tool_call_id="c",
        name="t",
        arguments="{}",
        effect_class=effect,
        idempotency_key=idempotency_key(RUN_ID, "c"),
        attempts=attempts,
        reconciled=verdict,
        decision=decision,
        unknown=unknown,
        requires_approval=gated,
    )


PLANS = [
    # (case, call, spec, action, attempt)
    ("read_only in flight", call_state("read_only", 1), None, "execute", 2),
    ("read_only never started", call_state("read_only"), None, "execute", 1),
    ("read_only unknown", call_state("read_only", 2, unknown=True), None, "execute", 3),
    ("idempotent_write in flight", call_state("idempotent_write", 1), None, "execute", 2),
    ("idempotent_write never started", call_state("idempotent_write"), None, "execute", 1),
    ("non_idempotent never started", call_state("non_idempotent"), WITHOUT_RECONCILE, "execute", 1),
    (
        "non_idempotent never started, reconcile",
        call_state("non_idempotent"),
        WITH_RECONCILE,
        "execute",
        1,
    ),
    (
        "non_idempotent in flight, reconcile",
        call_state("non_idempotent", 1),
        WITH_RECONCILE,
        "reconcile",
        2,
    ),
    (
        "non_idempotent in flight, no reconcile",
        call_state("non_idempotent", 1),
        WITHOUT_RECONCILE,
        "ask_human",
        2,
    ),
    ("non_idempotent in flight, tool gone", call_state("non_idempotent", 1), None, "ask_human", 2),
    ("verdict not_done", call_state("non_idempotent", 1, "not_done"), WITH_RECONCILE, "execute", 2),
    ("verdict unknown", call_state("non_idempotent", 1, "unknown"), WITH_RECONCILE, "ask_human", 2),
    (
        "verdict unknown, no reconcile",
        call_state("non_idempotent", 1, "unknown"),
        WITHOUT_RECONCILE,
        "ask_human",
        2,
    ),
    (
        "unknown, no reconcile",
        call_state("non_idempotent", 1, unknown=True),
        WITHOUT_RECONCILE,
        "ask_human",
        2,
    ),
    (
        "decision approve",
        call_state("non_idempotent", 1, decision="approve"),
        WITHOUT_RECONCILE,
        "execute",
        2,
    ),
    (
        "decision not_happened",
        call_state("non_idempotent", 1, decision="not_happened"),
        WITHOUT_RECONCILE,
        "execute",
        2,
    ),
    (
        "approved before it ever ran",
        call_state("non_idempotent", decision="approve"),
        None,
        "execute",
        1,
    ),
    (
        "second crash after not_happened",
        call_state("non_idempotent", 2),
        WITH_RECONCILE,
        "reconcile",
        3,
    ),
    # consent: a gated call waits for a person before its first run
    ("gated, never asked", call_state("read_only", gated=True), None, "ask_consent", 1),
    (
        "gated non_idempotent",
        call_state("non_idempotent", gated=True),
        WITH_RECONCILE,
        "ask_consent",
        1,
    ),
    (
        "gated, approved",
        call_state("read_only", decision="approve", gated=True),
        None,
        "execute",
        1,
    ),
    ("gated, started then crashed", call_state("read_only", 1, gated=True), None, "execute", 2),
    (
        "gated non_idempotent in flight",
        call_state("non_idempotent", 1, gated=True),
        WITH_RECONCILE,
        "reconcile",
        2,
    ),
]


@pytest.mark.parametrize(
    ("call", "spec", "action", "attempt"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS]
)
def test_plan_call(call: CallState, spec: ToolSpec | None, action: str, attempt: int) -> None:
    plan = plan_call(call, spec)
    assert plan == ToolPlan(tool_call_id="c", action=action, attempt=attempt, reason=plan.reason)
    assert plan.reason


def test_plan_reasons_say_why() -> None:
    assert "reconcile" in plan_call(call_state("non_idempotent", 1), WITH_RECONCILE).reason
    assert "no reconcile" in plan_call(call_state("non_idempotent", 1), None).reason
    assert "could not tell" in plan_call(call_state("non_idempotent", 1, "unknown"), None).reason
    assert "idempotency key" in plan_call(call_state("idempotent_write", 1), None).reason


SPECS = [None, WITH_RECONCILE, WITHOUT_RECONCILE, ToolSpec(effect_class="read_only")]
COMBOS = list(
    itertools.product(
        ["read_only", "idempotent_write", "non_idempotent", None],
        [0, 1, 3],
        [None, "done", "not_done", "unknown"],
        [None, "approve", "not_happened"],
        [False, True],
        [False, True],
        SPECS,
    )
)


def test_guarantee_3_over_every_combination() -> None:
    for effect, attempts, verdict, decision, unknown, gated, spec in COMBOS:
        call = call_state(effect, attempts, verdict, decision, unknown, gated)
        plan = plan_call(call, spec)
        case = (effect, attempts, verdict, decision, unknown, gated, spec)
        person_said_run = decision in ("approve", "not_happened")
        assert plan.tool_call_id == "c", case
        assert plan.attempt == attempts + 1, case
        if plan.action == "reconcile":
            assert call.in_flight and spec is not None and spec.has_reconcile, case
            assert verdict is None, case  # a reconcile is asked once per attempt
        if plan.action == "ask_consent":
            assert gated and not call.in_flight and not person_said_run, case
        if not call.in_flight:
            # never started: it runs, unless its tool's policy still waits for consent
            expected = "ask_consent" if gated and not person_said_run else "execute"
            assert plan.action == expected, case
        elif effect in ("read_only", "idempotent_write"):
            assert plan.action == "execute", case
        else:
            # never run again automatically: only a verdict or a person lets it run
            runs = plan.action == "execute"
            assert runs == (verdict == "not_done" or person_said_run), case


def test_only_non_idempotent_calls_record_their_start() -> None:
    assert needs_start_record(call_state("non_idempotent"))
    assert not needs_start_record(call_state("read_only"))
    assert not needs_start_record(call_state("idempotent_write"))
    assert not needs_start_record(call_state(None))


# -- next_step -------------------------------------------------------------------------------

TOOLS = {
    "tool_a": ToolSpec(effect_class="read_only"),
    "tool_b": ToolSpec(effect_class="read_only"),
    "tool_n": WITH_RECONCILE,
}
REQUEUED: list[Event] = [*FAILED, RunRequeued(reason="retry")]


def _gated_request(call_id: str) -> ToolCallRequested:
    return dataclasses.replace(request(0, call_id), requires_approval=True)


def _approve(call_id: str) -> ApprovalDecided:
    return ApprovalDecided(turn_index=0, tool_call_id=call_id, decision="approve")


def _plans(*rows: tuple[str, str, int]) -> RunTools:
    return RunTools(
        plans=tuple(ToolPlan(tool_call_id=i, action=a, attempt=n, reason="") for i, a, n in rows)
    )


STEPS = [
    ("queued", [created()], StartRun()),
    ("requeued after a failure", REQUEUED, StartRun()),
    (
        "running, no turn yet",
        [created(), started()],
        CallModel(turn_index=0, turn_recorded=False, attempt=1),
    ),
    ("turn started, no reply", RUNNING_T0, CallModel(turn_index=0, turn_recorded=True, attempt=1)),
    (
        "turn started, two failed attempts",
        [
            *RUNNING_T0,
            *(ModelCallFailed(turn_index=0, attempt=n, code="rate_limited") for n in (1, 2)),
        ],
        CallModel(turn_index=0, turn_recorded=True, attempt=3),
    ),
    (
        "model failed for good, resumed",
        [
            *RUNNING_T0,
            ModelCallFailed(turn_index=0, attempt=1, code="rate_limited"),
            RunFailed(code="rate_limited", phase="model"),
            RunRequeued(),
            started(2),
        ],
        CallModel(turn_index=0, turn_recorded=True, attempt=2),
    ),
    ("reply without calls", REPLIED, Finish(output="done", stop_reason="end_turn")),
    (
        "reply cut short",
        [*RUNNING_T0, reply(0, text="par", stop_reason="max_tokens")],
        Finish(output="par", stop_reason="max_tokens"),
    ),
    ("all results in", BOTH_DONE, CallModel(turn_index=1, turn_recorded=False, attempt=1)),
    ("some results in", A_DONE, _plans(("b", "execute", 1))),
    ("none in", AWAITING_TWO, _plans(("a", "execute", 1), ("b", "execute", 1))),
    (
        "non_idempotent in flight",
        [*RUNNING_T0, reply(0, "n"), request(0, "n", "non_idempotent"), start(0, "n")],
        _plans(("n", "reconcile", 2)),
    ),
    # "a" waits on a person; "b", of the same turn, need not: it runs meanwhile.
    ("awaiting approval, a sibling runs", POLICY_WAIT, _plans(("b", "execute", 1))),
    (
        "awaiting approval, nothing else to do",
        [*POLICY_WAIT, result(0, "b")],
        Wait(status=RunStatus.AWAITING_APPROVAL),
    ),
    (
        "awaiting approval, an in-flight sibling nothing can settle waits too",
        [
            *RUNNING_T0,
            reply(0, "a", "x"),
            request(0, "a"),
            request(0, "x", "non_idempotent"),
            start(0, "x"),
            ask(0, "a"),
        ],
        Wait(status=RunStatus.AWAITING_APPROVAL),
    ),
    ("completed", COMPLETED, Wait(status=RunStatus.COMPLETED)),
    ("failed", FAILED, Wait(status=RunStatus.FAILED)),
    ("cancelled", CANCELLED, Wait(status=RunStatus.CANCELLED)),
    ("timed out", TIMED_OUT, Wait(status=RunStatus.TIMED_OUT)),
    (
        "resumed with calls open",
        [*A_DONE, RunFailed(code="tool_error", phase="tool"), RunRequeued(), started(2)],
        ResumeTurn(turn_index=0),
    ),
    (
        "resumed turn",
        [
            *A_DONE,
            RunFailed(code="tool_error", phase="tool"),
            RunRequeued(),
            started(2),
            TurnResumed(turn_index=0),
        ],
        _plans(("b", "execute", 1)),
    ),
    (
        "resumed with all results in",
        [*BOTH_DONE, RunFailed(code="tool_error", phase="tool"), RunRequeued(), started(2)],
        CallModel(turn_index=1, turn_recorded=False, attempt=1),
    ),
    (
        "resumed after a cancel",
        [*BOTH_DONE, RunCancelled(), RunRequeued(), started(2)],
        CallModel(turn_index=1, turn_recorded=False, attempt=1),
    ),
    (
        "next turn, no reply yet",
        [*BOTH_DONE, TurnStarted(turn_index=1)],
        CallModel(turn_index=1, turn_recorded=True, attempt=1),
    ),
    (
        "a gated call waits for consent",
        [*RUNNING_T0, reply(0, "a"), _gated_request("a")],
        _plans(("a", "ask_consent", 1)),
    ),
    (
        "a gated call, approved",
        [*RUNNING_T0, reply(0, "a"), _gated_request("a"), ask(0, "a"), _approve("a")],
        _plans(("a", "execute", 1)),
    ),
    (
        "a gated call whose approval timed out, resumed",
        [
            *RUNNING_T0,
            reply(0, "a"),
            _gated_request("a"),
            ask(0, "a"),
            RunTimedOut(),
            RunRequeued(),
            started(2),
            TurnResumed(turn_index=0),
        ],
        _plans(("a", "ask_consent", 1)),
    ),
    # a cancel request comes first, unless the run already ended
    (
        "cancel requested while queued",
        [created(), RunCancelRequested(reason="r")],
        Cancel(reason="r"),
    ),
    (
        "cancel requested while running",
        [*RUNNING_T0, RunCancelRequested(reason="r")],
        Cancel(reason="r"),
    ),
    (
        "cancel requested while awaiting tools",
        [*A_DONE, RunCancelRequested(reason="r")],
        Cancel(reason="r"),
    ),
    (
        "cancel requested while awaiting approval",
        [*POLICY_WAIT, RunCancelRequested(reason="r")],
        Cancel(reason="r"),
    ),
    (
        "cancel requested, then the run completed",
        [*REPLIED, RunCancelRequested(reason="r"), RunCompleted(output="done")],
        Wait(status=RunStatus.COMPLETED),
    ),
    (
        "cancel carried out",
        [*A_DONE, RunCancelRequested(reason="r"), result(0, "b", "cancelled"), RunCancelled()],
        Wait(status=RunStatus.CANCELLED),
    ),
]


def _no_reasons(step: Any) -> Any:
    if isinstance(step, RunTools):
        return [(p.tool_call_id, p.action, p.attempt) for p in step.plans]
    return step


@pytest.mark.parametrize(("log", "expected"), [s[1:] for s in STEPS], ids=[s[0] for s in STEPS])
def test_next_step(log: list[Event], expected: Any) -> None:
    assert _no_reasons(next_step(fold(log), TOOLS)) == _no_reasons(expected)


LIMITED = [
    # (case, log, limits, expected)
    (
        "first turn is the last",
        [created(), started()],
        Limits(max_turns=1),
        CallModel(turn_index=0, turn_recorded=False, attempt=1, final=True),
    ),
    (
        "next turn is the last",
        BOTH_DONE,
        Limits(max_turns=2),
        CallModel(turn_index=1, turn_recorded=False, attempt=1, final=True),
    ),
    (
        "next turn is not the last",
        BOTH_DONE,
        Limits(max_turns=3),
        CallModel(turn_index=1, turn_recorded=False, attempt=1),
    ),
    (
        "retrying the last turn",
        RUNNING_T0,
        Limits(max_turns=1),
        CallModel(turn_index=0, turn_recorded=True, attempt=1, final=True),
    ),
    (
        "the last turn's calls were refused",
        [
            *RUNNING_T0,
            reply(0, "a", text="so far"),
            request(0, "a", rejection="limit"),
            result(0, "a", "limit", 0),
        ],
        Limits(max_turns=1),
        Finish(output="so far", stop_reason="max_turns"),
    ),
    (
        "the last turn answered",
        REPLIED,
        Limits(max_turns=1),
        Finish(output="done", stop_reason="end_turn"),
    ),
]


@pytest.mark.parametrize(
    ("log", "limits", "expected"), [c[1:] for c in LIMITED], ids=[c[0] for c in LIMITED]
)
def test_next_step_within_max_turns(log: list[Event], limits: Limits, expected: Any) -> None:
    state = fold(log)
    step = next_step(state, TOOLS, limits)
    assert step == expected
    fold(automatic_events(state, step), start=state)  # what it implies is legal


def test_the_turn_limit_reached_while_awaiting_tools() -> None:
    # max_turns lowered before a resume: completing from awaiting_tool is illegal, so the model
    # gets one last turn, told to hand off.
    state = fold(BOTH_DONE)  # awaiting_tool, turn 0 settled
    limits = Limits(max_turns=1)
    step = next_step(state, TOOLS, limits)
    assert step == CallModel(turn_index=1, turn_recorded=False, attempt=1, final=True)
    state = fold(automatic_events(state, step), start=state)
    assert state.status is RunStatus.RUNNING
    state = fold([reply(1, text="handoff")], start=state)
    step = next_step(state, TOOLS, limits)
    assert step == Finish(output="handoff", stop_reason="end_turn")
    assert fold(automatic_events(state, step), start=state).status is RunStatus.COMPLETED


def test_automatic_events() -> None:
    state = fold(BOTH_DONE)
    assert automatic_events(state, CallModel(turn_index=1, turn_recorded=False, attempt=1)) == [
        TurnStarted(turn_index=1)
    ]
    assert automatic_events(
        state, CallModel(turn_index=1, turn_recorded=False, attempt=1, final=True)
    ) == [
        TurnStarted(turn_index=1),
        NoticeInjected(turn_index=1, content=FINAL_TURN_NOTICE, reason="final_turn"),
    ]
    assert automatic_events(state, CallModel(turn_index=1, turn_recorded=True, attempt=2)) == []
    replied = fold(REPLIED)
    assert automatic_events(replied, Finish(output="done", stop_reason="end_turn")) == [
        RunCompleted(output="done", stop_reason="end_turn", usage=replied.usage)
    ]
    assert automatic_events(state, Fail(code="budget_exceeded", phase="runtime", message="m")) == [
        RunFailed(code="budget_exceeded", phase="runtime", message="m", last_seq=state.seq)
    ]
    for step in (
        StartRun(),
        ResumeTurn(turn_index=0),
        Cancel(reason="r"),
        Wait(status=RunStatus.QUEUED),
    ):
        assert automatic_events(state, step) == []


def test_next_step_of_nothing() -> None:
    with pytest.raises(ValueError, match="empty run state"):
        next_step(RunState(), TOOLS)


def _tools_for_generated_logs() -> dict[str, ToolSpec]:
    return {
        f"tool_{c}": ToolSpec(effect_class=c, has_reconcile=c == "non_idempotent")
        for c in ("read_only", "idempotent_write", "non_idempotent")
    }


@settings(max_examples=35, deadline=None)
@given(run_logs())
def test_next_step_at_every_batch_boundary(log: RunLog) -> None:
    evs = log.events
    tools = _tools_for_generated_logs()
    for k in log.boundaries()[1:]:
        state = fold(evs[:k])
        step = next_step(state, tools)
        assert state.status is not None
        if state.status in FINISHED:
            assert step == Wait(status=state.status)
        elif state.cancel_requested is not None:
            assert step == Cancel(reason=state.cancel_requested)
        elif state.status is RunStatus.AWAITING_APPROVAL:
            # The calls no person decides on go ahead; the ones waiting on a person never.
            free = [
                c.tool_call_id
                for c in state.pending_calls()
                if c.tool_call_id not in state.approvals
            ]
            if isinstance(step, RunTools):
                assert [p.tool_call_id for p in step.plans] == [
                    i for i in free if i in {p.tool_call_id for p in step.plans}
                ]
                assert all(p.action in ("execute", "reconcile") for p in step.plans)
            else:
                assert step == Wait(status=state.status)
        elif state.status is RunStatus.QUEUED:
            assert step == StartRun()
        # Whatever a step implies by itself is a legal continuation of the log.
        fold(automatic_events(state, step), start=state)
        if isinstance(step, RunTools):
            pending = [c for c in state.pending_calls() if c.tool_call_id not in state.approvals]
            if state.status is RunStatus.AWAITING_APPROVAL:
                planned = {p.tool_call_id for p in step.plans}
                pending = [c for c in pending if c.tool_call_id in planned]
            assert [p.tool_call_id for p in step.plans] == [c.tool_call_id for c in pending]
            for plan, call in zip(step.plans, pending, strict=True):
                if plan.action == "execute" and call.in_flight:
                    # Guarantee 3: an in-flight non_idempotent call runs again only on a word.
                    assert call.effect_class != "non_idempotent" or (
                        call.reconciled == "not_done"
                        or call.decision in ("approve", "not_happened")
                    )
        if isinstance(step, CallModel) and not step.turn_recorded:
            assert state.pending_calls() == []
            assert step.turn_index == state.turn_index + 1


@settings(max_examples=35, deadline=None)
@given(run_logs(), st.integers(1, 4), st.integers(1, 3))
def test_after_opening_is_the_next_step_once_the_opening_is_in(
    log: RunLog, max_turns: int, max_step_failures: int
) -> None:
    """What the session takes for the next step without deciding it (``after_opening``) is
    what ``next_step`` says, at every boundary and under any turn or failure limit."""
    tools = _tools_for_generated_logs()
    limits = Limits(max_turns=max_turns, max_step_failures=max_step_failures)
    for k in log.boundaries()[1:]:
        state = fold(log.events[:k])
        step = next_step(state, tools, limits)
        known = after_opening(step)
        extra = automatic_events(state, step)
        if known is None:
            assert not (isinstance(step, CallModel) and not step.turn_recorded)
            continue
        assert extra
        assert next_step(fold(extra, start=state), tools, limits) == known


# -- reply_events ----------------------------------------------------------------------------


def test_reply_events_write_intent_and_reject_refused_calls_in_one_batch() -> None:
    state = fold(RUNNING_T0)
    message = AssistantMessage(
        text="",
        tool_calls=(
            ToolCall(id="a", name="search", arguments='{"q": "x"}'),
            ToolCall(id="b", name="nope", arguments="{}"),
            ToolCall(id="c", name="pay", arguments="{not json"),
            ToolCall(id="d", name="pay", arguments='{"amount": 5}'),
        ),
        stop_reason="tool_use",
    )
    admissions = {
        "a": CallAdmission(
            tool_call_id="a", arguments='{"q":"x"}', effect_class="read_only", rejection=None
        ),
        "b": CallAdmission(
            tool_call_id="b", arguments="{}", effect_class=None, rejection="unknown tool 'nope'"
        ),
        "c": CallAdmission(
            tool_call_id="c",
            arguments="{not json",
            effect_class="non_idempotent",
            rejection="arguments are not JSON",
        ),
        "d": CallAdmission(
            tool_call_id="d",
            arguments='{"amount":5}',
            effect_class="non_idempotent",
            rejection=None,
        ),
    }
    events = reply_events(state, 0, message, Usage(output_tokens=7), "m", admissions)
    assert [e.kind for e in events] == [
        "assistant_message",
        *["tool_call_requested"] * 4,
        *["tool_result_recorded"] * 2,
    ]
    reply_event = events[0]
    assert isinstance(reply_event, AssistantMessageRecorded)
    assert (reply_event.message, reply_event.usage, reply_event.model) == (
        message,
        Usage(output_tokens=7),
        "m",
    )
    requests = [e for e in events if isinstance(e, ToolCallRequested)]
    assert [r.tool_call_id for r in requests] == ["a", "b", "c", "d"]
    for r in requests:
        v = admissions[r.tool_call_id]
        assert (r.arguments, r.effect_class, r.rejection) == (
            v.arguments,
            v.effect_class,
            v.rejection,
        )
        assert r.idempotency_key == hashlib.sha256((RUN_ID + r.tool_call_id).encode()).hexdigest()
    rejected = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert [(r.tool_call_id, r.content) for r in rejected] == [
        ("b", "unknown tool 'nope'"),
        ("c", "arguments are not JSON"),
    ]
    assert all(r.is_error and r.source == "rejected" and r.attempt == 0 for r in rejected)

    after = fold(events, start=state)
    assert after.status is RunStatus.AWAITING_TOOL
    assert [c.tool_call_id for c in after.pending_calls()] == ["a", "d"]
    step = next_step(
        after, {"search": ToolSpec(effect_class="read_only"), "pay": WITHOUT_RECONCILE}
    )
    assert _no_reasons(step) == [("a", "execute", 1), ("d", "execute", 1)]


def test_reply_events_without_calls_finish_the_run() -> None:
    state = fold(RUNNING_T0)
    message = AssistantMessage(text="the answer")
    events = reply_events(state, 0, message, Usage(), "m", {})
    assert [e.kind for e in events] == ["assistant_message"]
    assert next_step(fold(events, start=state), {}) == Finish(
        output="the answer", stop_reason="end_turn"
    )


def test_a_reply_whose_calls_are_all_rejected_goes_back_to_the_model() -> None:
    state = fold(RUNNING_T0)
    message = AssistantMessage(tool_calls=(ToolCall(id="x", name="nope", arguments=""),))
    admissions = {
        "x": CallAdmission(tool_call_id="x", arguments="", effect_class=None, rejection="no")
    }
    after = fold(reply_events(state, 0, message, Usage(), "m", admissions), start=state)
    assert next_step(after, {}) == CallModel(turn_index=1, turn_recorded=False, attempt=1)
    assert [m.content for m in after.conversation() if isinstance(m, ToolResultMessage)] == ["no"]


def _reply(*calls: tuple[str, str, str]) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in calls),
        stop_reason="tool_use",
    )


def _ok(message: AssistantMessage, *, gated: bool = False) -> dict[str, CallAdmission]:
    return {
        c.id: CallAdmission(
            tool_call_id=c.id,
            arguments=c.arguments,
            effect_class="read_only",
            rejection=None,
            needs_approval=gated,
        )
        for c in message.tool_calls
    }


def _refusals(events: list[Event]) -> dict[str, tuple[str, str]]:
    return {
        e.tool_call_id: (e.source, e.content)
        for e in events
        if isinstance(e, ToolResultRecorded) and e.is_error
    }


def test_reply_events_honour_max_tool_calls_per_turn() -> None:
    state = fold(RUNNING_T0)
    message = _reply(("a", "s", '{"q":1}'), ("b", "s", '{"q":2}'), ("c", "s", '{"q":3}'))
    events = reply_events(
        state, 0, message, Usage(), "m", _ok(message), Limits(max_tool_calls_per_turn=2)
    )
    refused = _refusals(events)
    assert list(refused) == ["c"]
    assert refused["c"][0] == "limit"
    assert "at most 2 tool calls" in refused["c"][1]
    requests = [e for e in events if isinstance(e, ToolCallRequested)]
    assert [r.rejection is None for r in requests] == [True, True, False]
    after = fold(events, start=state)
    assert [c.tool_call_id for c in after.pending_calls()] == ["a", "b"]


def test_reply_events_in_the_final_turn_refuse_every_call() -> None:
    state = fold(RUNNING_T0)
    message = _reply(("a", "s", "{}"), ("b", "t", "{}"))
    limits = Limits(max_turns=1)
    events = reply_events(state, 0, message, Usage(), "m", _ok(message), limits)
    refused = _refusals(events)
    assert list(refused) == ["a", "b"]
    assert all(
        source == "limit" and "limit of 1 turns" in text for source, text in refused.values()
    )
    after = fold(events, start=state)
    assert after.status is RunStatus.RUNNING  # refused calls are never awaited
    step = next_step(after, TOOLS, limits)
    assert step == Finish(output="", stop_reason="max_turns")
    assert fold(automatic_events(after, step), start=after).status is RunStatus.COMPLETED


def test_reply_events_intercept_a_loop_within_one_reply() -> None:
    state = fold(RUNNING_T0)
    same = ("s", '{"q":1}')
    message = _reply(("a", *same), ("b", *same), ("c", *same), ("d", "s", '{"q":2}'))
    events = reply_events(state, 0, message, Usage(), "m", _ok(message), Limits(repeat_threshold=3))
    loops = [e for e in events if isinstance(e, LoopDetected)]
    assert loops == [LoopDetected(turn_index=0, tool_call_id="c", name="s", repeats=3)]
    refused = _refusals(events)
    assert list(refused) == ["c"]
    assert refused["c"][0] == "loop"
    assert "3 times in a row" in refused["c"][1]
    kinds = [e.kind for e in events]
    assert kinds.index("loop_detected") < kinds.index("tool_result_recorded")
    after = fold(events, start=state)
    assert [c.tool_call_id for c in after.pending_calls()] == ["a", "b", "d"]


def test_reply_events_count_repeats_across_turns() -> None:
    state = fold(RUNNING_T0)
    same = ("s", '{"q":1}')
    first = _reply(("a", *same), ("b", *same))
    state = fold(reply_events(state, 0, first, Usage(), "m", _ok(first)), start=state)
    state = fold([result(0, "a"), result(0, "b"), TurnStarted(turn_index=1)], start=state)
    second = _reply(("c", *same))
    events = reply_events(state, 1, second, Usage(), "m", _ok(second), Limits(repeat_threshold=3))
    assert [e for e in events if isinstance(e, LoopDetected)] == [
        LoopDetected(turn_index=1, tool_call_id="c", name="s", repeats=3)
    ]
    other = _reply(("c", "s", '{"q":2}'))
    events = reply_events(state, 1, other, Usage(), "m", _ok(other), Limits(repeat_threshold=3))
    assert _refusals(events) == {}  # different arguments break the streak


def test_reply_events_ask_consent_for_gated_calls() -> None:
    state = fold(RUNNING_T0)
    message = _reply(("a", "pay", '{"amount":5}'), ("b", "look", "{}"))
    admissions = _ok(message, gated=True) | {
        "b": CallAdmission(
            tool_call_id="b",
            arguments="{}",
            effect_class=None,
            rejection="no such tool",
            needs_approval=True,
        )
    }
    consent = Consent(tokens={"a": "tok-a", "b": "tok-b"}, deadline=60.0)
    events = reply_events(state, 0, message, Usage(), "m", admissions, consent=consent)
    assert [e.kind for e in events] == [
        "assistant_message",
        "tool_call_requested",
        "tool_call_requested",
        "tool_result_recorded",
        "approval_requested",
    ]
    requests = [e for e in events if isinstance(e, ToolCallRequested)]
    assert [r.requires_approval for r in requests] == [True, False]  # a refused call is not gated
    (asked,) = [e for e in events if isinstance(e, ApprovalRequested)]
    assert (asked.tool_call_id, asked.reason, asked.token, asked.deadline) == (
        "a",
        "policy",
        "tok-a",
        60.0,
    )
    assert asked.payload is not None and asked.payload["arguments"] == {"amount": 5}
    after = fold(events, start=state)
    assert after.status is RunStatus.AWAITING_APPROVAL
    assert list(after.approvals) == ["a"]


def test_reply_events_refuse_a_gated_call_without_a_token() -> None:
    state = fold(RUNNING_T0)
    message = _reply(("a", "pay", "{}"))
    with pytest.raises(ValueError, match="needs consent but no token"):
        reply_events(state, 0, message, Usage(), "m", _ok(message, gated=True))
    with pytest.raises(ValueError, match="needs consent but no token"):
        reply_events(
            state, 0, message, Usage(), "m", _ok(message, gated=True), consent=Consent(tokens={})
        )


# -- starts, reconciles, asking a person -----------------------------------------------------


def test_started_event_carries_the_deterministic_effect_id() -> None:
    state = fold(AWAITING_TWO)
    call = state.calls["a"]
    event = started_event(state, call, 1)
    assert event.effect_id == effect_id(RUN_ID, 0, "a", 1)
    assert started_event(state, call, 2).effect_id != event.effect_id
    after = fold([event], start=state)
    assert after.calls["a"].attempts == 1
    # An idempotent write run again carries the same key: it is the call's, not the attempt's.
    assert after.calls["a"].idempotency_key == idempotency_key(RUN_ID, "a")


def _ni_in_flight() -> RunState:
    return fold(NI_STARTED)


def test_reconcile_done_records_the_found_result() -> None:
    state = _ni_in_flight()
    events = reconcile_events(state, state.calls["a"], "done", "it happened", "tok2")
    assert events == [
        ToolReconciled(turn_index=0, tool_call_id="a", verdict="done"),
        ToolResultRecorded(
            turn_index=0,
            tool_call_id="a",
            name="tool_a",
            content="it happened",
            source="reconciled",
            attempt=1,
        ),
    ]
    after = fold(events, start=state)
    assert after.pending_calls() == []
    assert next_step(after, TOOLS) == CallModel(turn_index=1, turn_recorded=False, attempt=1)


def test_reconcile_not_done_lets_it_run() -> None:
    state = _ni_in_flight()
    events = reconcile_events(state, state.calls["a"], "not_done", "", "tok2")
    assert events == [ToolReconciled(turn_index=0, tool_call_id="a", verdict="not_done")]
    after = fold(events, start=state)
    assert _no_reasons(next_step(after, {"tool_a": WITH_RECONCILE})) == [("a", "execute", 2)]


def test_reconcile_unknown_asks_a_person() -> None:
    state = _ni_in_flight()
    events = reconcile_events(state, state.calls["a"], "unknown", "", "tok2")
    assert [e.kind for e in events] == [
        "tool_reconciled",
        "tool_outcome_unknown",
        "approval_requested",
    ]
    after = fold(events, start=state)
    assert after.status is RunStatus.AWAITING_APPROVAL
    assert after.approvals["a"].token == "tok2"
    assert after.approvals["a"].reason == "outcome_unknown"
    assert next_step(after, TOOLS) == Wait(status=RunStatus.AWAITING_APPROVAL)


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [('{"to": "bob", "amount": 5}', {"to": "bob", "amount": 5}), ("{broken", "{broken")],
)
def test_ask_human_events(arguments: str, shown: Any) -> None:
    state = fold(
        [
            *RUNNING_T0,
            reply(0, "a"),
            ToolCallRequested(
                turn_index=0,
                tool_call_id="a",
                name="tool_a",
                arguments=arguments,
                effect_class="non_idempotent",
                idempotency_key=idempotency_key(RUN_ID, "a"),
            ),
            start(0, "a"),
        ]
    )
    events = ask_human_events(state, state.calls["a"], "tok9", "worker died")
    unknown, approval = events
    assert unknown == ToolOutcomeUnknown(turn_index=0, tool_call_id="a", reason="worker died")
    assert isinstance(approval, ApprovalRequested)
    assert (approval.reason, approval.token) == ("outcome_unknown", "tok9")
    assert approval.payload is not None
    assert approval.payload["tool"] == "tool_a"
    assert approval.payload["arguments"] == shown
    assert approval.payload["idempotency_key"] == idempotency_key(RUN_ID, "a")
    assert approval.payload["why"] == "worker died"
    json.dumps(approval.payload)  # it is stored as JSON
    after = fold(events, start=state)
    assert after.calls["a"].unknown
    # Asked again later (say, after a timeout): the outcome is not declared unknown twice.
    again = ask_human_events(after, after.calls["a"], "tok10", "still unknown")
    assert [e.kind for e in again] == ["approval_requested"]


# -- decision_events -------------------------------------------------------------------------

UNKNOWN_WAIT: list[Event] = [
    *NI_STARTED,
    ToolOutcomeUnknown(turn_index=0, tool_call_id="a", reason="died"),
    ask(0, "a", "outcome_unknown"),
]
DECIDED_ONCE: list[Event] = [
    *POLICY_WAIT,
    ApprovalDecided(turn_index=0, tool_call_id="a", decision="approve"),
]

DEADLINE_WAIT: list[Event] = [*AWAITING_TWO, dataclasses.replace(ask(0, "a"), deadline=100.0)]

BAD_DECISIONS: list[tuple[str, list[Event], str, str, dict[str, Any], str]] = [
    ("wrong token", POLICY_WAIT, "a", "approve", {"token": "nope"}, "token does not match"),
    ("no pending approval", AWAITING_TWO, "a", "approve", {}, "no pending approval"),
    ("unknown call", POLICY_WAIT, "zz", "approve", {}, "no pending approval for call 'zz'"),
    (
        "another call than the pending one",
        POLICY_WAIT,
        "b",
        "deny",
        {"reason": "r"},
        "no pending approval",
    ),
    (
        "approve on an unknown outcome",
        UNKNOWN_WAIT,
        "a",
        "approve",
        {},
        "whether the call happened",
    ),
    ("deny on an unknown outcome", UNKNOWN_WAIT, "a", "deny", {}, "not 'deny'"),
    ("happened on a policy approval", POLICY_WAIT, "a", "happened", {"result": "x"}, "for consent"),
    ("not_happened on a policy approval", POLICY_WAIT, "a", "not_happened", {}, "for consent"),
    ("skip on a policy approval", POLICY_WAIT, "a", "skip", {}, "for consent"),
    ("happened without its result", UNKNOWN_WAIT, "a", "happened", {}, "needs the call's result"),
    (
        "edited arguments with deny",
        POLICY_WAIT,
        "a",
        "deny",
        {"arguments": {"x": 1}},
        "only go with approve",
    ),
    ("deny without a reason", POLICY_WAIT, "a", "deny", {}, "a denial needs a reason"),
    (
        "decided after the deadline",
        DEADLINE_WAIT,
        "a",
        "approve",
        {"now": 100.5},
        "deadline has passed",
    ),
    ("second decision", DECIDED_ONCE, "a", "deny", {"reason": "r"}, "may already be decided"),
    (
        "second identical decision",
        DECIDED_ONCE,
        "a",
        "approve",
        {"token": "tok"},
        "no pending approval",
    ),
    (
        "after a cancel",
        [*POLICY_WAIT, *cancel_events(fold(POLICY_WAIT), "stop")],
        "a",
        "approve",
        {},
        "no pending",
    ),
    ("after a timeout", TIMED_OUT, "a", "approve", {}, "no pending approval"),
]


@pytest.mark.parametrize(
    ("log", "call_id", "decision", "kwargs", "message"),
    [b[1:] for b in BAD_DECISIONS],
    ids=[b[0] for b in BAD_DECISIONS],
)
def test_decision_refused(
    log: list[Event], call_id: str, decision: Any, kwargs: dict[str, Any], message: str
) -> None:
    state = fold(log)
    before = state.to_json()
    with pytest.raises(ApprovalError, match=message) as info:
        decision_events(state, call_id, decision, **kwargs)
    assert isinstance(info.value, UserError)
    assert state.to_json() == before


def test_approve_with_edited_arguments() -> None:
    state = fold(POLICY_WAIT)
    events = decision_events(
        state, "a", "approve", token="tok", by="alice", arguments={"b": 2, "a": 1}
    )
    assert events == [
        ApprovalDecided(
            turn_index=0,
            tool_call_id="a",
            decision="approve",
            by="alice",
            arguments='{"a":1,"b":2}',
        )
    ]
    after = fold(events, start=state)
    assert after.status is RunStatus.AWAITING_TOOL
    assert after.approvals == {}
    assert after.calls["a"].effective_arguments() == '{"a":1,"b":2}'
    assert _no_reasons(next_step(after, TOOLS)) == [("a", "execute", 1), ("b", "execute", 1)]


def test_approve_with_argument_text_and_no_token() -> None:
    events = decision_events(fold(POLICY_WAIT), "a", "approve", arguments='{"raw": true}')
    assert isinstance(events[0], ApprovalDecided)
    assert events[0].arguments == '{"raw": true}'


def test_deny_records_an_error_result_with_the_reason() -> None:
    state = fold(POLICY_WAIT)
    events = decision_events(state, "a", "deny", token="tok", reason="too expensive")
    assert [e.kind for e in events] == ["approval_decided", "tool_result_recorded"]
    denial = events[1]
    assert isinstance(denial, ToolResultRecorded)
    assert denial.is_error and denial.source == "approval"
    assert "too expensive" in denial.content
    after = fold(events, start=state)
    assert after.calls["a"].result == denial
    assert after.status is RunStatus.AWAITING_TOOL


@pytest.mark.parametrize(
    ("decision", "kwargs", "kinds", "is_error", "next_action"),
    [
        (
            "happened",
            {"result": "sent, id 7"},
            ["approval_decided", "tool_result_recorded"],
            False,
            None,
        ),
        ("skip", {}, ["approval_decided", "tool_result_recorded"], True, None),
        ("not_happened", {}, ["approval_decided"], None, ("a", "execute", 2)),
    ],
)
def test_decisions_about_an_unknown_outcome(
    decision: Any, kwargs: dict[str, Any], kinds: list[str], is_error: bool | None, next_action: Any
) -> None:
    state = fold(UNKNOWN_WAIT)
    events = decision_events(state, "a", decision, token="tok", **kwargs)
    assert [e.kind for e in events] == kinds
    after = fold(events, start=state)
    assert after.status is RunStatus.AWAITING_TOOL
    if is_error is None:
        assert _no_reasons(next_step(after, {"tool_a": WITHOUT_RECONCILE})) == [next_action]
    else:
        settled = after.calls["a"].result
        assert settled is not None
        assert settled.is_error is is_error
        assert settled.source == "approval"
        assert settled.attempt == 1
        if decision == "happened":
            assert settled.content == "sent, id 7"
        assert next_step(after, TOOLS) == CallModel(turn_index=1, turn_recorded=False, attempt=1)


def test_two_pending_approvals_are_decided_one_by_one() -> None:
    state = fold([*AWAITING_TWO, ask(0, "a"), ask(0, "b")])
    state = fold(decision_events(state, "b", "deny", token="tok", reason="no"), start=state)
    assert state.status is RunStatus.AWAITING_APPROVAL
    assert list(state.approvals) == ["a"]
    state = fold(decision_events(state, "a", "approve", token="tok"), start=state)
    assert state.status is RunStatus.AWAITING_TOOL
    assert _no_reasons(next_step(state, TOOLS)) == [("a", "execute", 1)]


def test_a_whole_recovery_of_a_non_idempotent_call() -> None:
    # crash while in flight -> reconcile unsure -> a person says it did not happen -> run it.
    state = fold(NI_STARTED)
    tools = {"tool_a": WITH_RECONCILE}
    assert _no_reasons(next_step(state, tools)) == [("a", "reconcile", 2)]
    state = fold(reconcile_events(state, state.calls["a"], "unknown", "", "t1"), start=state)
    assert next_step(state, tools) == Wait(status=RunStatus.AWAITING_APPROVAL)
    state = fold(decision_events(state, "a", "not_happened", token="t1"), start=state)
    assert _no_reasons(next_step(state, tools)) == [("a", "execute", 2)]
    state = fold([started_event(state, state.calls["a"], 2)], start=state)
    # It crashed again mid-call: the reconcile is asked again, for the new attempt.
    assert _no_reasons(next_step(state, tools)) == [("a", "reconcile", 3)]
    state = fold([result(0, "a", attempt=2)], start=state)
    assert next_step(state, tools) == CallModel(turn_index=1, turn_recorded=False, attempt=1)


@pytest.mark.parametrize("now", [None, 0.0, 99.9, 100.0])
def test_a_decision_in_time(now: float | None) -> None:
    state = fold(DEADLINE_WAIT)
    events = decision_events(state, "a", "approve", token="tok", now=now)
    assert fold(events, start=state).status is RunStatus.AWAITING_TOOL
    assert timeout_events(state, now if now is not None else 0.0) == []


@pytest.mark.parametrize(
    ("log", "now", "times_out"),
    [
        (DEADLINE_WAIT, 100.0, False),
        (DEADLINE_WAIT, 100.5, True),
        (POLICY_WAIT, 10.0**12, False),  # no deadline: waits forever
        (AWAITING_TWO, 10.0**12, False),  # nothing to wait for
        ([*DEADLINE_WAIT, _approve("a")], 10.0**12, False),  # decided in time
        ([*A_DONE, dataclasses.replace(ask(0, "b"), deadline=5.0)], 6.0, True),
    ],
    ids=["at-deadline", "past-deadline", "no-deadline", "not-waiting", "decided", "second-call"],
)
def test_timeout_events(log: list[Event], now: float, times_out: bool) -> None:
    state = fold(log)
    events = timeout_events(state, now)
    if not times_out:
        assert events == []
        return
    (event,) = events
    assert isinstance(event, RunTimedOut)
    assert "deadline" in event.reason
    assert all(c in event.reason for c in state.approvals)
    after = fold(events, start=state)
    assert after.status is RunStatus.TIMED_OUT
    assert after.approvals == {}


def test_consent_events_ask_again() -> None:
    state = fold([*RUNNING_T0, reply(0, "a"), _gated_request("a")])
    events = consent_events(state.calls["a"], "tok2", 50.0)
    (asked,) = events
    assert isinstance(asked, ApprovalRequested)
    assert (asked.reason, asked.token, asked.deadline) == ("policy", "tok2", 50.0)
    assert asked.payload is not None
    assert asked.payload["tool"] == "tool_a"
    assert asked.payload["arguments"] == {}
    after = fold(events, start=state)
    assert after.status is RunStatus.AWAITING_APPROVAL
    assert next_step(after, TOOLS) == Wait(status=RunStatus.AWAITING_APPROVAL)


# -- cancel_events ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "log",
    [
        [created()],
        RUNNING_T0,
        REPLIED,
        AWAITING_TWO,
        A_DONE,
        BOTH_DONE,
        NI_STARTED,
        POLICY_WAIT,
        UNKNOWN_WAIT,
    ],
    ids=[
        "queued",
        "running",
        "replied",
        "awaiting",
        "one-done",
        "all-done",
        "in-flight",
        "policy-wait",
        "unknown-wait",
    ],
)
def test_cancel_events(log: list[Event]) -> None:
    state = fold(log)
    pending = state.pending_calls()
    events = cancel_events(state, "user pressed stop")
    assert isinstance(events[-1], RunCancelled)
    assert events[-1].reason == "user pressed stop"
    synthetic = events[:-1]
    assert [e.tool_call_id for e in synthetic] == [c.tool_call_id for c in pending]
    for e, c in zip(synthetic, pending, strict=True):
        assert isinstance(e, ToolResultRecorded)
        assert e.is_error and e.source == "cancelled"
        assert e.attempt == c.attempts
        assert "user pressed stop" in e.content
        # a call that had started may have happened: the result must not pretend otherwise
        assert ("may or may not have taken effect" in e.content) is c.in_flight
    after = fold(events, start=state)
    assert after.status is RunStatus.CANCELLED
    assert after.pending_calls() == [] and after.approvals == {}
    assert after.error == {"code": "cancelled", "phase": "run", "message": "user pressed stop"}
    _assert_one_result_per_call(after)


def _assert_one_result_per_call(state: RunState) -> None:
    convo = state.conversation()
    calls = [c.id for m in convo if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in convo if isinstance(m, ToolResultMessage)]
    assert Counter(results) == Counter(calls)


@settings(max_examples=35, deadline=None)
@given(run_logs())
def test_cancel_at_any_batch_boundary(log: RunLog) -> None:
    evs = log.events
    for k in log.boundaries()[1:]:
        state = fold(evs[:k])
        if state.status in FINISHED:
            continue
        after = fold(cancel_events(state, "stop"), start=state)
        assert after.status is RunStatus.CANCELLED
        assert all(c.result is not None for c in after.calls.values())
        _assert_one_result_per_call(after)


def test_cancel_events_close_unrequested_calls_too() -> None:
    state = fold([*RUNNING_T0, reply(0, "a")])
    after = fold(cancel_events(state, "stop"), start=state)
    assert after.status is RunStatus.CANCELLED


def test_cancel_events_on_a_finished_run_do_not_fold() -> None:
    state = fold(COMPLETED)
    events = cancel_events(state, "late")
    assert events == [RunCancelled(reason="late")]
    with pytest.raises(IllegalTransition, match="completed -> cancelled"):
        apply(state.copy(), events[0])


def _admission(call_id: str, effect: Any, *, gated: bool = False) -> CallAdmission:
    return CallAdmission(
        tool_call_id=call_id,
        arguments="{}",
        effect_class=effect,
        rejection=None if effect else "no such tool",
        needs_approval=gated,
    )


def test_start_now_puts_the_named_non_idempotent_starts_in_the_intent_batch() -> None:
    state = fold(RUNNING_T0)
    message = _reply(("a", "pay", "{}"), ("b", "pay", "{}"), ("c", "look", "{}"), ("d", "x", "{}"))
    admissions = {
        "a": _admission("a", "non_idempotent"),
        "b": _admission("b", "non_idempotent"),
        "c": _admission("c", "read_only"),
        "d": _admission("d", None),
    }
    # a: named, starts now; b: not named (no reconcile), starts later; c: not non_idempotent;
    # d: refused, never starts.
    events = reply_events(state, 0, message, Usage(), "m", admissions, start_now={"a", "c", "d"})
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(e.tool_call_id, e.attempt) for e in started] == [("a", 1)]
    assert started[0].effect_id == effect_id(RUN_ID, 0, "a", 1)
    after = fold(events, start=state)
    assert after.calls["a"].in_flight and not after.calls["b"].in_flight
    # A crash now leaves "a" in flight: recovery reconciles it, like any started call.
    step = next_step(after, {"pay": WITH_RECONCILE, "look": ToolSpec(effect_class="read_only")})
    assert ("a", "reconcile", 2) in _no_reasons(step)
    assert ("b", "execute", 1) in _no_reasons(step)


def test_start_now_starts_nothing_while_a_call_of_the_turn_waits_for_consent() -> None:
    state = fold(RUNNING_T0)
    message = _reply(("a", "pay", "{}"), ("b", "pay", "{}"))
    admissions = {
        "a": _admission("a", "non_idempotent"),
        "b": _admission("b", "read_only", gated=True),
    }
    consent = Consent(tokens={"b": "tok"})
    events = reply_events(
        state, 0, message, Usage(), "m", admissions, consent=consent, start_now={"a"}
    )
    assert not any(isinstance(e, ToolCallStarted) for e in events)
    assert fold(events, start=state).status is RunStatus.AWAITING_APPROVAL
