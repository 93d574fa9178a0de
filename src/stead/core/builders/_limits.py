"""Builders for the limits of waits and attempts: a question's wait for a person, a tool's retried
attempt, and a run's deadline (``Limits.max_duration``). Pure: every time is passed in."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from stead.core.events import (
    ApprovalRequested,
    Event,
    RunDeadlineSet,
    RunTimedOut,
    ToolAttemptFailed,
    ToolCallDeferred,
)
from stead.core.fold import CallState, RunState, apply
from stead.core.states import RunStatus


def _loads_or_raw(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def question_events(
    call: CallState,
    question: str,
    schema: dict[str, Any],
    token: str,
    deadline: float | None,
) -> list[Event]:
    """A question tool's call waits for a person's answer (``reason="question"``)."""
    payload: dict[str, Any] = {
        "tool": call.name,
        "arguments": _loads_or_raw(call.arguments),
        "question": question,
        "answer_schema": schema,
    }
    return [
        ApprovalRequested(
            turn_index=call.turn_index,
            tool_call_id=call.tool_call_id,
            reason="question",
            payload=payload,
            token=token,
            deadline=deadline,
        )
    ]


def deferred_events(
    call: CallState,
    attempt: int,
    ask: Literal["approval", "result"],
    reason: str,
    token: str,
    deadline: float | None,
) -> list[Event]:
    """Attempt ``attempt`` of ``call`` stopped without acting and asked a person: for consent
    (``approval``: the answer is approve, which runs the call again, approved, or deny) or
    for the call's result, made elsewhere (``result``: a question, answered with its result).
    One commit: the attempt's end (``tool_call_deferred``) and the wait it opens."""
    payload: dict[str, Any] = {"tool": call.name, "arguments": _loads_or_raw(call.arguments)}
    if ask == "approval":
        payload["question"] = (
            "The tool asks, while running, for consent to go on. approve runs it again, "
            "approved; deny with a reason the model will read."
        )
    else:
        payload["question"] = (
            "The tool hands this call over to be made elsewhere: answer with its result "
            "(what the model should read)."
        )
        payload["answer_schema"] = {}
    if reason:
        payload["why"] = reason
    return [
        ToolCallDeferred(
            turn_index=call.turn_index,
            tool_call_id=call.tool_call_id,
            attempt=attempt,
            ask=ask,
            reason=reason,
        ),
        ApprovalRequested(
            turn_index=call.turn_index,
            tool_call_id=call.tool_call_id,
            reason="policy" if ask == "approval" else "question",
            payload=payload,
            token=token,
            deadline=deadline,
        ),
    ]


def attempt_failed_event(
    call: CallState, attempt: int, error: str, retry_in: float
) -> ToolAttemptFailed:
    """Attempt ``attempt`` of ``call`` failed and runs again after ``retry_in`` seconds."""
    return ToolAttemptFailed(
        turn_index=call.turn_index,
        tool_call_id=call.tool_call_id,
        attempt=attempt,
        error=error,
        retry_in=retry_in,
    )


def deadline_events(max_duration: float | None, counts_waiting: bool, now: float) -> list[Event]:
    """The deadline a run starting at ``now`` gets (nothing without ``max_duration``)."""
    if max_duration is None:
        return []
    return [RunDeadlineSet(deadline=now + max_duration, counts_waiting=counts_waiting)]


def deadline_passed(state: RunState, now: float) -> bool:
    """Has the run's own deadline passed at ``now``? Never for a run that is queued or
    finished, nor while it waits on a person when that time does not count."""
    if state.deadline is None or now <= state.deadline:
        return False
    if state.status is RunStatus.AWAITING_APPROVAL:
        return state.deadline_counts_waiting
    return state.status in (RunStatus.RUNNING, RunStatus.AWAITING_TOOL)


def run_timeout_events(state: RunState, now: float) -> list[Event]:
    """``run_timed_out`` when the run's deadline has passed; else nothing."""
    if not deadline_passed(state, now):
        return []
    assert state.deadline is not None
    late = now - state.deadline
    return [
        RunTimedOut(
            reason=f"the run passed its deadline (Limits.max_duration) {late:.3g}s ago; "
            "a resume gives it a fresh one"
        )
    ]


def wait_credit_events(state: RunState, decided: list[Event], now: float) -> list[Event]:
    """When the person's decision ``decided`` ends the run's wait and that wait does not
    count against its deadline: the deadline, moved later by the time the person took
    (from the earliest pending request's ``asked_at``)."""
    if state.deadline is None or state.deadline_counts_waiting or not decided:
        return []
    stamps = [(a.payload or {}).get("asked_at") for a in state.approvals.values()]
    asked = [t for t in stamps if isinstance(t, int | float)]
    if not asked:
        return []
    probe = state.copy()
    for e in decided:
        apply(probe, e)
    if probe.status is RunStatus.AWAITING_APPROVAL:
        return []  # other calls still wait: the clock stays stopped
    waited = max(0.0, now - min(asked))
    return [RunDeadlineSet(deadline=state.deadline + waited, counts_waiting=False)]


def stamp_asked(batch: list[Event], now: float) -> list[Event]:
    """``batch`` with each approval request's payload saying when it was asked (``asked_at``),
    for a run whose deadline leaves the time waiting on a person out (``wait_credit_events``)."""
    return [
        dataclasses.replace(e, payload={**(e.payload or {}), "asked_at": now})
        if isinstance(e, ApprovalRequested) and "asked_at" not in (e.payload or {})
        else e
        for e in batch
    ]
