"""Folding a log into a run's state: deterministic, splittable, snapshot-able, and strict."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import replace
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
    events,
    reply,
    request,
    result,
    run_logs,
    sample_event,
    start,
    started,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.core.events import (
    EVENT_TYPES,
    ApprovalDecided,
    AssistantMessageRecorded,
    Event,
    LoopDetected,
    ModelCallFailed,
    NoticeInjected,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunDeadlineSet,
    RunFailed,
    RunRequeued,
    RunTimedOut,
    ToolAttemptFailed,
    ToolCallRequested,
    ToolOutcomeUnknown,
    ToolReconciled,
    ToolsListed,
    TraceLinked,
    TurnResumed,
    TurnStarted,
)
from stead.core.fold import (
    RECENT_CALLS,
    STATE_VERSION,
    RunState,
    TurnUsage,
    apply,
    call_digest,
    fold,
)
from stead.core.messages import AssistantMessage, ToolResultMessage, Usage, UserMessage
from stead.core.states import RunStatus
from stead.errors import Conflict, IllegalTransition

LOGS = settings(max_examples=40, deadline=None)


def assert_refused(
    prefix: list[Event], event: Event, exc: type[Exception], match: str | None = None
) -> None:
    """``event`` is refused on top of ``prefix`` and leaves no trace."""
    state = fold(prefix)
    before = state.to_json()
    twin = state.copy()
    with pytest.raises(exc, match=match):
        apply(state, event)
    assert state.to_json() == before
    assert state == twin


# -- the happy path, by hand -----------------------------------------------------------------


def test_a_small_run() -> None:
    log: list[Event] = [
        *BOTH_DONE,
        TurnStarted(turn_index=1),
        reply(1, text="all done"),
        RunCompleted(output="all done", usage=Usage(input_tokens=20, output_tokens=4)),
    ]
    state = fold(log)
    assert state.status is RunStatus.COMPLETED
    assert state.seq == len(log)
    assert (state.run_id, state.agent, state.input) == (RUN_ID, "agent", "hello")
    assert state.config == {"max_turns": 3}
    assert state.turn_index == 1
    assert state.output == "all done"
    assert state.usage == Usage(input_tokens=20, output_tokens=4)
    assert state.tool_calls_total == 2
    assert state.owner == "w1"
    assert state.epoch == 1
    assert state.calls == {}  # calls are per turn
    assert [m.role for m in state.messages] == ["user", "assistant", "tool", "tool", "assistant"]


def test_statuses_along_the_way() -> None:
    seen = []
    state = RunState()
    for e in [*POLICY_WAIT, ApprovalDecided(turn_index=0, tool_call_id="a", decision="deny")]:
        apply(state, e)
        seen.append(state.status.value if state.status else None)
    assert seen == [
        "queued",
        "running",
        "running",
        "running",
        "awaiting_tool",
        "awaiting_tool",
        "awaiting_approval",
        "awaiting_tool",
    ]
    assert state.calls["a"].decision == "deny"


def test_explicit_sequence_numbers() -> None:
    state = RunState()
    apply(state, created(), seq=7)
    assert state.seq == 7
    apply(state, started())
    assert state.seq == 8


def test_fold_does_not_touch_its_start_state() -> None:
    base = fold(AWAITING_TWO)
    before = base.to_json()
    after = fold([result(0, "a"), result(0, "b")], start=base)
    assert base.to_json() == before
    assert after.pending_calls() == []
    assert after.seq == base.seq + 2


# -- properties over generated valid logs ----------------------------------------------------


@LOGS
@given(run_logs())
def test_every_generated_log_folds(log: RunLog) -> None:
    state = fold(log.events)
    assert state.status is not None
    assert state.seq == len(log.events)
    requests = [e for e in log.events if isinstance(e, ToolCallRequested)]
    assert state.tool_calls_total == len(requests)
    replies = [e for e in log.events if isinstance(e, AssistantMessageRecorded)]
    total = Usage()
    for r in replies:
        total = total + r.usage
    assert state.usage == total


@LOGS
@given(run_logs())
def test_fold_is_deterministic(log: RunLog) -> None:
    assert fold(log.events).to_json() == fold(log.events).to_json()
    assert fold(log.events) == fold(list(log.events))


@LOGS
@given(run_logs())
def test_fold_splits_at_every_point(log: RunLog) -> None:
    evs = log.events
    whole = fold(evs).to_json()
    for k in range(len(evs) + 1):
        assert fold(evs[k:], start=fold(evs[:k])).to_json() == whole, k


@LOGS
@given(run_logs())
def test_snapshot_round_trip_at_every_point(log: RunLog) -> None:
    evs = log.events
    whole = fold(evs)
    state = RunState()
    for k, e in enumerate([None, *evs]):
        if e is not None:
            apply(state, e)
        snap = state.to_json()
        restored = RunState.from_json(snap)
        assert restored.to_json() == snap, k
        assert restored == state, k
        wired = RunState.from_json(json.loads(json.dumps(snap)))
        assert wired.to_json() == snap, k
        assert wired == state, k
        # A resume folds the rest of the log on top of the snapshot.
        assert fold(evs[k:], start=wired).to_json() == whole.to_json(), k


def _check_conversation(state: RunState) -> None:
    convo = state.conversation()
    key = lambda m: json.dumps(dataclasses.asdict(m), sort_keys=True)  # noqa: E731
    assert Counter(map(key, convo)) == Counter(map(key, state.messages))
    for i, m in enumerate(convo):
        if not isinstance(m, AssistantMessage):
            continue
        block = []
        for follower in convo[i + 1 :]:
            if not isinstance(follower, ToolResultMessage):
                break
            block.append(follower.tool_call_id)
        recorded = set(block)
        assert block == [c.id for c in m.tool_calls if c.id in recorded]


@LOGS
@given(run_logs())
def test_conversation_puts_results_in_call_order(log: RunLog) -> None:
    evs = log.events
    for k in range(len(evs) + 1):
        _check_conversation(fold(evs[:k]))


@LOGS
@given(run_logs())
def test_ended_runs_have_a_valid_history(log: RunLog) -> None:
    state = fold(log.events)
    if state.status not in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        return
    convo = state.conversation()
    calls = [c.id for m in convo if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in convo if isinstance(m, ToolResultMessage)]
    assert Counter(results) == Counter(calls)  # exactly one result per call
    assert state.pending_calls() == []
    assert state.approvals == {}


@st.composite
def state_and_stray_event(draw: st.DrawFn) -> tuple[list[Event], Event]:
    log = draw(run_logs())
    evs = log.events
    k = draw(st.integers(0, len(evs)))
    event = draw(events())
    ids = sorted({e.tool_call_id for e in evs if hasattr(e, "tool_call_id")}) or ["x"]
    changes: dict[str, Any] = {}
    if hasattr(event, "tool_call_id"):
        changes["tool_call_id"] = draw(st.sampled_from(ids))
    if hasattr(event, "turn_index"):
        changes["turn_index"] = draw(st.integers(-1, 4))
    return evs[:k], dataclasses.replace(event, **changes)


@settings(max_examples=80, deadline=None)
@given(state_and_stray_event())
def test_an_event_is_applied_whole_or_not_at_all(case: tuple[list[Event], Event]) -> None:
    prefix, event = case
    state = fold(prefix)
    before = state.to_json()
    try:
        apply(state, event)
    except (IllegalTransition, Conflict):
        assert state.to_json() == before
    else:
        assert state.seq == len(prefix) + 1


# -- conversation order, by hand -------------------------------------------------------------


def test_conversation_orders_results_by_call_not_by_arrival() -> None:
    log: list[Event] = [
        *RUNNING_T0,
        reply(0, "a", "b", "c"),
        request(0, "a"),
        request(0, "b"),
        request(0, "c"),
        result(0, "c"),
        result(0, "a"),
        result(0, "b"),
        TurnStarted(turn_index=1),
        reply(1, "d", "e"),
        request(0 + 1, "d"),
        request(1, "e"),
        result(1, "e"),
    ]
    state = fold(log)
    arrival = [m.tool_call_id for m in state.messages if isinstance(m, ToolResultMessage)]
    assert arrival == ["c", "a", "b", "e"]
    convo = state.conversation()
    assert [type(m).__name__ for m in convo] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "ToolResultMessage",
        "ToolResultMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    assert [m.tool_call_id for m in convo if isinstance(m, ToolResultMessage)] == [
        "a",
        "b",
        "c",
        "e",
    ]
    assert convo[0] == UserMessage(content="hello")


def test_last_assistant_and_pending_calls() -> None:
    state = fold(A_DONE)
    reply_msg = state.last_assistant()
    assert reply_msg is not None
    assert [c.id for c in reply_msg.tool_calls] == ["a", "b"]
    assert [c.tool_call_id for c in state.pending_calls()] == ["b"]
    assert fold(RUNNING_T0).last_assistant() is None


def test_call_state_flags() -> None:
    state = fold([*NI_STARTED, ToolReconciled(turn_index=0, tool_call_id="a", verdict="unknown")])
    call = state.calls["a"]
    assert call.pending and call.in_flight
    assert call.attempts == 1
    assert call.reconciled == "unknown"
    state = fold([*NI_STARTED, ToolOutcomeUnknown(turn_index=0, tool_call_id="a", reason="died")])
    assert state.calls["a"].unknown
    state = fold(
        [
            *POLICY_WAIT,
            ApprovalDecided(
                turn_index=0, tool_call_id="a", decision="approve", arguments='{"x":2}'
            ),
        ]
    )
    call = state.calls["a"]
    assert (call.decision, call.effective_arguments()) == ("approve", '{"x":2}')
    assert not call.in_flight
    # A new start clears the last verdict and decision: they were about the previous attempt.
    state = fold([*NI_STARTED, ToolReconciled(turn_index=0, tool_call_id="a", verdict="not_done")])
    apply(state, start(0, "a", attempt=2))
    assert (state.calls["a"].reconciled, state.calls["a"].attempts) == (None, 2)


def test_a_refused_call_is_never_awaited() -> None:
    state = fold([*RUNNING_T0, reply(0, "a"), request(0, "a", None, "unknown tool")])
    assert state.status is RunStatus.RUNNING
    state = fold([result(0, "a", "rejected", 0)], start=state)
    assert state.status is RunStatus.RUNNING
    assert state.pending_calls() == []


def test_a_notice_joins_the_conversation_before_the_reply() -> None:
    state = fold([*RUNNING_T0, NoticeInjected(turn_index=0, content="last turn"), reply(0)])
    assert [m.role for m in state.conversation()] == ["user", "notice", "assistant"]


def test_repetition_memory_is_bounded_and_ordered() -> None:
    state = fold(A_DONE)
    assert state.recent_calls == [
        call_digest("tool_a", "{}"),
        call_digest("tool_b", "{}"),
    ]
    ids = [f"c{i}" for i in range(RECENT_CALLS + 5)]
    log: list[Event] = [*RUNNING_T0, reply(0, *ids), *(request(0, i) for i in ids)]
    recent = fold(log).recent_calls
    assert recent == [call_digest(f"tool_{i}", "{}") for i in ids][-RECENT_CALLS:]


def test_cancel_request_is_remembered_until_the_cancel() -> None:
    state = fold([*A_DONE, RunCancelRequested(reason="stop", by="alice")])
    assert state.cancel_requested == "stop"
    assert state.status is RunStatus.AWAITING_TOOL  # a request is not a transition
    snap = RunState.from_json(json.loads(json.dumps(state.to_json())))
    assert snap.cancel_requested == "stop"
    state = fold([result(0, "b", "cancelled"), RunCancelled(reason="stop")], start=state)
    assert state.cancel_requested is None


def test_a_v3_snapshot_keeps_its_reconcile_answer_under_the_new_name() -> None:
    # v3 wrote a call's reconcile answer as "verdict"; v4 calls it "reconciled". A snapshot
    # written before the rename loads with the answer kept (and says the same as the fold).
    state = fold([*NI_STARTED, ToolReconciled(turn_index=0, tool_call_id="a", verdict="not_done")])
    snap = json.loads(json.dumps(state.to_json()))
    assert [c["reconciled"] for c in snap["calls"]] == ["not_done"]
    v3 = {
        **{k: v for k, v in snap.items() if k not in ("turn_usage", "data")},  # new in v4
        "v": 3,
        "calls": [
            {("verdict" if k == "reconciled" else k): v for k, v in c.items()}
            for c in snap["calls"]
        ],
    }
    loaded = RunState.from_json(v3)
    assert loaded.calls["a"].reconciled == "not_done"
    # v3 knew only the usage's sum: it comes back as one entry of turn -1.
    assert {**loaded.to_json(), "turn_usage": None} == {**state.to_json(), "turn_usage": None}


def test_snapshot_of_another_version_is_refused() -> None:
    snap = fold(A_DONE).to_json()
    assert snap["v"] == STATE_VERSION
    with pytest.raises(ValueError, match=f"snapshot v{STATE_VERSION + 1} is newer"):
        RunState.from_json(snap | {"v": STATE_VERSION + 1})
    with pytest.raises(ValueError, match="snapshot version None is not a version number"):
        RunState.from_json({k: v for k, v in snap.items() if k != "v"})
    with pytest.raises(ValueError, match="no upgrade from snapshot v1"):
        RunState.from_json(snap | {"v": 1})


def test_a_v2_snapshot_is_upcast_to_the_state_it_held() -> None:
    """v3 added the step-failure counter (and call_ids, rebuilt from the messages): a v2
    snapshot, written before step_failed existed, loads with no failed step."""
    state = fold(A_DONE)
    v2 = {
        k: v for k, v in state.to_json().items() if k not in ("step_failures", "last_step_failure")
    }
    v2.pop("turn_usage")
    restored = RunState.from_json(json.loads(json.dumps(v2 | {"v": 2})))
    # v4's per-turn usage is not in a v2 snapshot: the sum is kept, as turn -1, model unknown
    assert restored.turn_usage == [TurnUsage(turn_index=-1, usage=state.usage)]
    restored.turn_usage = state.turn_usage
    assert restored == state
    assert restored.call_ids == state.call_ids and restored.call_ids
    assert restored.to_json() == state.to_json()


def test_usage_is_counted_per_turn_and_a_v3_snapshot_keeps_the_sum() -> None:
    """v4 records each turn's usage and model (``RunView.turn_usage``, ``cost_usd``); a v3
    snapshot only knew the sum, which is kept as one entry whose model is unknown."""
    state = fold(A_DONE)
    assert [t.turn_index for t in state.turn_usage] == list(range(state.turn_index + 1))
    total = Usage()
    for t in state.turn_usage:
        total = total + t.usage
    assert total == state.usage
    v3 = {k: v for k, v in state.to_json().items() if k != "turn_usage"} | {"v": 3}
    restored = RunState.from_json(json.loads(json.dumps(v3)))
    assert restored.turn_usage == [TurnUsage(turn_index=-1, usage=state.usage)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seq": "7"}, "field 'seq': expected an integer"),
        ({"status": "exploded"}, "field 'status'"),
        ({"messages": [{"role": "robot"}]}, "field 'messages': \\[0\\]: unknown message role"),
        ({"calls": [{"tool_call_id": "a"}]}, "field 'calls': \\[0\\]: call state: missing field"),
        ({"surprise": 1}, "unknown fields \\['surprise'\\]"),
    ],
)
def test_a_malformed_snapshot_is_refused_naming_the_field(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RunState.from_json(fold(A_DONE).to_json() | change)


def test_snapshot_keeps_approvals_and_results() -> None:
    state = fold([*POLICY_WAIT, result(0, "b")])
    restored = RunState.from_json(json.loads(json.dumps(state.to_json())))
    assert restored.approvals == state.approvals
    assert restored.calls == state.calls
    assert restored.calls["b"].result == result(0, "b")
    assert restored.status is RunStatus.AWAITING_APPROVAL


# -- refusals --------------------------------------------------------------------------------

NOT_CREATED = sorted(set(EVENT_TYPES) - {"run_created"})


@pytest.mark.parametrize("kind", NOT_CREATED)
def test_nothing_before_run_created(kind: str) -> None:
    assert_refused([], sample_event(EVENT_TYPES[kind]), IllegalTransition, "must be run_created")


NOT_DRIVEN = (IllegalTransition, "is not being driven")
REFUSALS = [
    ("second run_created", [created()], created(), IllegalTransition, "already exists"),
    ("tools_listed on a finished run", COMPLETED, ToolsListed(source="s", tools={}), *NOT_DRIVEN),
    ("trace_linked on a finished run", COMPLETED, TraceLinked(traceparent="00-"), *NOT_DRIVEN),
    (
        "result for a call in the reply but never requested",
        [*RUNNING_T0, reply(0, "a")],
        result(0, "a"),
        IllegalTransition,
        "never requested",
    ),
    ("result for an unknown call", AWAITING_TWO, result(0, "zz"), IllegalTransition, "never"),
    ("result in another turn", AWAITING_TWO, result(1, "a"), IllegalTransition, "current turn"),
    ("second result", A_DONE, result(0, "a"), Conflict, "already recorded"),
    (
        "second result from a reconcile",
        A_DONE,
        result(0, "a", "reconciled"),
        Conflict,
        "already recorded",
    ),
    ("request twice", AWAITING_TWO, request(0, "a"), Conflict, "already requested"),
    ("request not in the reply", AWAITING_TWO, request(0, "c"), IllegalTransition, "not in"),
    ("request before the reply", RUNNING_T0, request(0, "a"), IllegalTransition, "message first"),
    (
        "turn_started with calls pending",
        A_DONE,
        TurnStarted(turn_index=1),
        IllegalTransition,
        "still has calls without results",
    ),
    (
        "turn_started while an approval is pending",
        POLICY_WAIT,
        TurnStarted(turn_index=1),
        IllegalTransition,
        "calls without results",
    ),
    ("turn_started skips a turn", REPLIED, TurnStarted(turn_index=2), IllegalTransition, "2 after"),
    (
        "turn_started twice",
        RUNNING_T0,
        TurnStarted(turn_index=0),
        IllegalTransition,
        "0 after turn 0",
    ),
    (
        "turn_started before the reply",
        RUNNING_T0,
        TurnStarted(turn_index=1),
        IllegalTransition,
        "no assistant message",
    ),
    (
        "completed with calls pending",
        A_DONE,
        RunCompleted(output="x"),
        IllegalTransition,
        "calls without results remain",
    ),
    ("started after its result", A_DONE, start(0, "a"), IllegalTransition, "settled or refused"),
    (
        "started though rejected",
        [*RUNNING_T0, reply(0, "a"), request(0, "a", None, "unknown tool")],
        start(0, "a"),
        IllegalTransition,
        "settled or refused",
    ),
    ("started skipping an attempt", AWAITING_TWO, start(0, "a", 2), IllegalTransition, "2 after 0"),
    ("started attempt again", NI_STARTED, start(0, "a", 1), IllegalTransition, "1 after 1"),
    ("started unknown call", AWAITING_TWO, start(0, "zz"), IllegalTransition, "never requested"),
    (
        "cancelled with open calls",
        AWAITING_TWO,
        RunCancelled(reason="x"),
        IllegalTransition,
        "cancelled result first",
    ),
    (
        "cancelled with an open approval",
        POLICY_WAIT,
        RunCancelled(reason="x"),
        IllegalTransition,
        "cancelled result first",
    ),
    (
        "executed result while waiting on approval",
        POLICY_WAIT,
        result(0, "a"),
        IllegalTransition,
        "waits on an approval",
    ),
    (
        "decision without an approval",
        AWAITING_TWO,
        ApprovalDecided(turn_index=0, tool_call_id="a", decision="approve"),
        IllegalTransition,
        "no approval is pending",
    ),
    (
        "decision for a settled call",
        [*POLICY_WAIT, ApprovalDecided(turn_index=0, tool_call_id="a", decision="approve")],
        ApprovalDecided(turn_index=0, tool_call_id="a", decision="deny"),
        IllegalTransition,
        "no approval is pending",
    ),
    ("approval twice", POLICY_WAIT, ask(0, "a"), IllegalTransition, "already waiting"),
    ("approval for a settled call", A_DONE, ask(0, "a"), IllegalTransition, "settled"),
    ("second reply", REPLIED, reply(0), IllegalTransition, "already has an assistant message"),
    ("reply for the next turn", RUNNING_T0, reply(1), IllegalTransition, "assistant message"),
    ("reply while queued", [created()], reply(-1), IllegalTransition, "no turn has started"),
    ("duplicate call ids", RUNNING_T0, reply(0, "a", "a"), IllegalTransition, "duplicate"),
    (
        "unknown outcome of a call that never started",
        AWAITING_TWO,
        ToolOutcomeUnknown(turn_index=0, tool_call_id="a", reason="?"),
        IllegalTransition,
        "only a started, unsettled call",
    ),
    (
        "reconciling a call that never started",
        AWAITING_TWO,
        ToolReconciled(turn_index=0, tool_call_id="a", verdict="done"),
        IllegalTransition,
        "only a started, unsettled call",
    ),
    (
        "reconciling a settled call",
        [*NI_STARTED, result(0, "a")],
        ToolReconciled(turn_index=0, tool_call_id="a", verdict="done"),
        IllegalTransition,
        "only a started, unsettled call",
    ),
    (
        "model failure after the reply",
        REPLIED,
        ModelCallFailed(turn_index=0, attempt=1, code="rate_limited"),
        IllegalTransition,
        "no model call in progress",
    ),
    (
        "turn_resumed with nothing open",
        [*BOTH_DONE, RunFailed(code="x", phase="tool"), RunRequeued(), started(2)],
        TurnResumed(turn_index=0),
        IllegalTransition,
        "no open turn",
    ),
    (
        "started while waiting on approval",
        POLICY_WAIT,
        start(0, "a"),
        IllegalTransition,
        "waits on an approval decision",
    ),
    (
        "turn_started while queued",
        [created()],
        TurnStarted(turn_index=0),
        IllegalTransition,
        "must be started",
    ),
    (
        "notice after the reply",
        REPLIED,
        NoticeInjected(turn_index=0, content="x"),
        IllegalTransition,
        "before its reply",
    ),
    (
        "notice for another turn",
        RUNNING_T0,
        NoticeInjected(turn_index=1, content="x"),
        IllegalTransition,
        "before its reply",
    ),
    (
        "loop detected on a settled call",
        A_DONE,
        LoopDetected(turn_index=0, tool_call_id="a", name="tool_a", repeats=3),
        IllegalTransition,
        "settled call cannot be intercepted",
    ),
    (
        "loop detected on an unknown call",
        A_DONE,
        LoopDetected(turn_index=0, tool_call_id="zz", name="tool_zz", repeats=3),
        IllegalTransition,
        "never requested",
    ),
    *(
        (
            f"cancel requested when {name}",
            log,
            RunCancelRequested(reason="x"),
            IllegalTransition,
            f"a {name} run cannot be cancelled",
        )
        for name, log in [
            ("completed", COMPLETED),
            ("failed", FAILED),
            ("cancelled", CANCELLED),
            ("timed_out", TIMED_OUT),
        ]
    ),
    # status changes the table forbids
    (
        "completed while queued",
        [created()],
        RunCompleted(output=""),
        IllegalTransition,
        "queued -> completed",
    ),
    (
        "timed out while queued (a deadline runs from the start)",
        [created()],
        RunTimedOut(reason="the run deadline"),
        IllegalTransition,
        "queued -> timed_out",
    ),
    (
        "a deadline for a finished run",
        COMPLETED,
        RunDeadlineSet(deadline=1.0),
        IllegalTransition,
        "finished run has no deadline",
    ),
    (
        "a failed attempt of a settled call",
        A_DONE,
        ToolAttemptFailed(turn_index=0, tool_call_id="a", attempt=1, error="x"),
        IllegalTransition,
        "settled or refused",
    ),
    (
        "a failed attempt skipping a number",
        AWAITING_TWO,
        ToolAttemptFailed(turn_index=0, tool_call_id="a", attempt=2, error="x"),
        IllegalTransition,
        "attempt 2 after 0",
    ),
    (
        "a failed attempt of a call waiting on a person",
        POLICY_WAIT,
        ToolAttemptFailed(turn_index=0, tool_call_id="a", attempt=1, error="x"),
        IllegalTransition,
        "waits on an approval",
    ),
    (
        "failed while awaiting approval",
        POLICY_WAIT,
        RunFailed(code="x", phase="tool"),
        IllegalTransition,
        "awaiting_approval -> failed",
    ),
    ("requeued while running", RUNNING_T0, RunRequeued(), IllegalTransition, "running -> queued"),
    (
        "requeued after completion",
        COMPLETED,
        RunRequeued(),
        IllegalTransition,
        "completed -> queued",
    ),
    (
        "cancelled after completion",
        COMPLETED,
        RunCancelled(),
        IllegalTransition,
        "completed -> cancelled",
    ),
    (
        "failed after completion",
        COMPLETED,
        RunFailed(code="x", phase="p"),
        IllegalTransition,
        "completed -> failed",
    ),
    ("started after completion", COMPLETED, started(2), IllegalTransition, "completed -> running"),
    (
        "next turn after completion",
        COMPLETED,
        TurnStarted(turn_index=1),
        IllegalTransition,
        "completed -> running",
    ),
    ("started while failed", FAILED, started(2), IllegalTransition, "failed -> running"),
    ("cancelled while failed", FAILED, RunCancelled(), IllegalTransition, "failed -> cancelled"),
    ("started while cancelled", CANCELLED, started(2), IllegalTransition, "cancelled -> running"),
    ("started while timed out", TIMED_OUT, started(2), IllegalTransition, "timed_out -> running"),
    (
        "request after a failure",
        [*RUNNING_T0, reply(0, "a"), RunFailed(code="x", phase="model")],
        request(0, "a"),
        IllegalTransition,
        "failed -> awaiting_tool",
    ),
    (
        "reply after a failure",
        FAILED,
        reply(0),
        IllegalTransition,
        "running run",
    ),
]


@pytest.mark.parametrize(
    ("prefix", "event", "exc", "match"),
    [r[1:] for r in REFUSALS],
    ids=[r[0] for r in REFUSALS],
)
def test_refused(prefix: list[Event], event: Event, exc: type[Exception], match: str) -> None:
    assert_refused(prefix, event, exc, match)


def test_illegal_transition_names_the_event() -> None:
    state = fold(COMPLETED)
    with pytest.raises(IllegalTransition) as info:
        apply(state, RunRequeued())
    assert info.value.event == "run_requeued"
    assert (info.value.current, info.value.target) == ("completed", "queued")


# -- found by these tests (kept as regressions) ----------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "event"),
    [
        (COMPLETED, RunCompleted(output="a different answer")),
        (FAILED, RunFailed(code="tool_error", phase="tool")),
        (CANCELLED, RunCancelled(reason="again")),
        (TIMED_OUT, RunTimedOut(reason="again")),
        ([created()], RunRequeued()),
        (RUNNING_T0, started(2)),
    ],
    ids=["completed", "failed", "cancelled", "timed_out", "requeued", "started"],
)
def test_a_lifecycle_event_does_not_repeat(prefix: list[Event], event: Event) -> None:
    assert_refused(prefix, event, IllegalTransition)


@pytest.mark.parametrize(
    "event",
    [TurnStarted(turn_index=1), RunCompleted(output="x"), RunCancelled(reason="x")],
    ids=lambda e: e.kind,
)
def test_unrequested_calls_of_the_reply_are_open(event: Event) -> None:
    # A reply's calls are open from the moment it is recorded, requested or not: the history
    # may not move on while a call in it has no result (Guarantee 4).
    state = fold([*RUNNING_T0, reply(0, "a", "b"), request(0, "a"), result(0, "a")])
    assert state.unrequested_calls() == ["b"]
    assert_refused(
        [*RUNNING_T0, reply(0, "a", "b"), request(0, "a"), result(0, "a")], event, IllegalTransition
    )
    assert_refused([*RUNNING_T0, reply(0, "a")], event, IllegalTransition)


@pytest.mark.parametrize(
    "event",
    [
        reply(-1, "a"),
        ModelCallFailed(turn_index=-1, attempt=1, code="rate_limited"),
        NoticeInjected(turn_index=-1, content="psst"),
    ],
    ids=lambda e: e.kind,
)
def test_nothing_of_a_turn_before_the_first_turn(event: Event) -> None:
    assert_refused([created(), started()], event, IllegalTransition)


@pytest.mark.parametrize(
    "ending",
    [
        [*AWAITING_TWO, RunCancelRequested(reason="stop"), RunFailed(code="x", phase="tool")],
        [*POLICY_WAIT, RunCancelRequested(reason="stop"), RunTimedOut(reason="late")],
    ],
    ids=["failed", "timed_out"],
)
def test_a_resume_does_not_inherit_an_old_cancel_request(ending: list[Event]) -> None:
    state = fold([*ending, RunRequeued(reason="try again")])
    assert state.status is RunStatus.QUEUED
    assert state.cancel_requested is None


@LOGS
@given(run_logs())
def test_conversation_asked_after_every_event_equals_one_built_from_scratch(log: RunLog) -> None:
    # conversation() keeps what it placed for the last call and places only new messages:
    # asked after every event of a live state, it must equal a fresh fold's, and a copy or a
    # snapshot of that state must not share the cache.
    live = RunState()
    for k, e in enumerate(log.events, start=1):
        apply(live, e)
        assert live.conversation() == fold(log.events[:k]).conversation(), k
        if k % 7 == 0:
            twin = live.copy()
            restored = RunState.from_json(live.to_json())
            assert twin.conversation() == restored.conversation() == live.conversation()


def test_a_snapshot_missing_a_field_is_refused_not_defaulted() -> None:
    """A snapshot writes every field, so one missing (here the conversation) is damage: read
    as its default, the run would resume with no messages."""
    snap = {k: v for k, v in fold(A_DONE).to_json().items() if k != "messages"}
    with pytest.raises(ValueError, match="missing field 'messages'"):
        RunState.from_json(snap)


# -- retries, deadlines --------------------------------------------------------------------


def test_a_failed_attempt_counts_and_leaves_the_call_open_for_the_next() -> None:
    state = fold(
        [*AWAITING_TWO, ToolAttemptFailed(turn_index=0, tool_call_id="a", attempt=1, error="x")]
    )
    call = state.calls["a"]
    assert (call.attempts, call.result, call.in_flight) == (1, None, True)
    # a start-recorded (non_idempotent) attempt fails as the attempt it started
    state = fold(
        [*NI_STARTED, ToolAttemptFailed(turn_index=0, tool_call_id="a", attempt=1, error="x")]
    )
    assert state.calls["a"].attempts == 1
    apply(state, start(0, "a", 2))
    assert state.calls["a"].attempts == 2


def test_a_run_deadline_is_kept_cleared_by_a_requeue_and_times_out_a_running_run() -> None:
    state = fold([*RUNNING_T0, RunDeadlineSet(deadline=100.0, counts_waiting=False)])
    assert (state.deadline, state.deadline_counts_waiting) == (100.0, False)
    snap = RunState.from_json(json.loads(json.dumps(state.to_json())))
    assert (snap.deadline, snap.deadline_counts_waiting) == (100.0, False)
    apply(state, RunTimedOut(reason="the run passed its deadline"))
    assert state.status is RunStatus.TIMED_OUT
    assert state.error == {
        "code": "timed_out",
        "phase": "run",
        "message": "the run passed its deadline",
    }
    apply(state, RunRequeued())
    assert state.deadline is None
    # an approval's deadline keeps its phase
    assert fold(AWAITING_TWO).status is RunStatus.AWAITING_TOOL
    timed = fold([*AWAITING_TWO, RunTimedOut(reason="late")])
    assert timed.status is RunStatus.TIMED_OUT and timed.calls["a"].pending


def test_a_v3_snapshot_is_upcast_with_no_deadline() -> None:
    state = fold(A_DONE)
    new_in_v4 = ("deadline", "deadline_counts_waiting", "data", "turn_usage")
    v3 = {k: v for k, v in state.to_json().items() if k not in new_in_v4}
    restored = RunState.from_json(json.loads(json.dumps(v3 | {"v": 3})))
    assert restored.deadline is None and restored.deadline_counts_waiting
    # v3 knew only the usage's sum: it comes back as one entry of turn -1.
    assert replace(restored, turn_usage=state.turn_usage) == state


def test_tools_listed_and_trace_linked_change_nothing_the_fold_keeps() -> None:
    """Notes for a timeline and a tracer: legal while a run is driven, and the state folds
    the same with or without them (so no snapshot carries them)."""
    notes = [ToolsListed(source="files", tools={"read": {"effect_class": "read_only"}})]
    notes.append(TraceLinked(traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"))
    plain, noted = fold(RUNNING_T0), fold([*RUNNING_T0, *notes])
    assert noted.status is plain.status
    assert noted.to_json() | {"seq": 0} == plain.to_json() | {"seq": 0}
