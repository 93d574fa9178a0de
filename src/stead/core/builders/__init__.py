"""Event builders: turn an answer into the events to append, validated against the state.
The only code outside ``stead.core`` that makes events is a caller of these (``_run`` holds
the ones that make a single run-level event; they are re-exported here).

An answer is a model reply, a reconcile verdict, a person's decision, a cancel, or the passing
of a deadline. Each builder is pure (tokens and times are passed in) and refuses what does not
fit the state before anything is written.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from stead.core.builders._admission import CallAdmission
from stead.core.builders._ids import unique_call_ids
from stead.core.builders._lifecycle import forked_event, version_event
from stead.core.builders._limits import (
    attempt_failed_event,
    deadline_events,
    deadline_passed,
    deferred_events,
    question_events,
    run_timeout_events,
    stamp_asked,
    wait_credit_events,
)
from stead.core.builders._notes import listing_events
from stead.core.builders._output import EndAccepted, EndRetry, checked_end_events, output_events
from stead.core.builders._run import (
    MODEL_MESSAGE_LIMIT,
    STEP_MESSAGE_LIMIT,
    cancel_request_event,
    created_event,
    model_failed_event,
    recovered_event,
    requeue_event,
    resumed_turn_event,
    run_failed_event,
    started_run_event,
    step_failed_event,
)
from stead.core.canonical import canonical_json, effect_id, idempotency_key
from stead.core.codegen import compile_copy
from stead.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageRecorded,
    Decision,
    Event,
    LoopDetected,
    ResultSource,
    RunCancelled,
    RunTimedOut,
    ToolCallRequested,
    ToolCallStarted,
    ToolOutcomeUnknown,
    ToolReconciled,
    ToolResultRecorded,
)
from stead.core.fold import CallState, RunState, call_digest
from stead.core.limits import Limits
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.core.states import RunStatus
from stead.errors import ApprovalError

__all__ = [
    "MODEL_MESSAGE_LIMIT",
    "STEP_MESSAGE_LIMIT",
    "CallAdmission",
    "Consent",
    "EndAccepted",
    "EndRetry",
    "ask_human_events",
    "attempt_failed_event",
    "cancel_events",
    "cancel_request_event",
    "checked_end_events",
    "consent_events",
    "created_event",
    "deadline_events",
    "deadline_passed",
    "decision_events",
    "deferred_events",
    "executed_result",
    "forked_event",
    "listing_events",
    "model_failed_event",
    "needs_start_record",
    "output_events",
    "question_events",
    "reconcile_events",
    "recovered_event",
    "reply_events",
    "requeue_event",
    "resumed_turn_event",
    "run_failed_event",
    "run_timeout_events",
    "stamp_asked",
    "started_event",
    "started_run_event",
    "step_failed_event",
    "timeout_events",
    "unique_call_ids",
    "version_event",
    "wait_credit_events",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Consent:
    """How to ask a person for consent: a token per call and an optional deadline."""

    tokens: Mapping[str, str]
    """Single-use token per tool call id."""
    deadline: float | None = None
    """When the run times out without a decision."""


def _result(
    call_turn: int,
    call_id: str,
    name: str,
    content: str,
    *,
    is_error: bool,
    source: ResultSource,
    attempt: int,
) -> ToolResultRecorded:
    where: dict[str, Any] = {"turn_index": call_turn, "tool_call_id": call_id, "name": name}
    return ToolResultRecorded(
        content=content, is_error=is_error, source=source, attempt=attempt, **where
    )


def _call_result(
    call: CallState, content: str, *, is_error: bool, source: ResultSource, attempt: int
) -> ToolResultRecorded:
    """The result of a requested call (``call``'s turn, id and name)."""
    where = (call.turn_index, call.tool_call_id, call.name)
    return _result(*where, content, is_error=is_error, source=source, attempt=attempt)


_EXECUTED: Final = compile_copy(CallState, ToolResultRecorded, "content", "is_error", "attempt")
"""A result from its call's turn, id and name (its source the default, ``executed``)."""


def executed_result(call: CallState, content: str, is_error: bool, attempt: int) -> Event:
    """The result of running ``attempt`` of ``call``'s handler (every tool step: built here,
    with no call through ``_result`` and no keywords packed into a dict)."""
    return _EXECUTED(call, content=content, is_error=is_error, attempt=attempt)


def reply_events(
    state: RunState,
    turn_index: int,
    message: AssistantMessage,
    usage: Usage,
    model: str,
    admissions: Mapping[str, CallAdmission],
    limits: Limits | None = None,
    consent: Consent | None = None,
    *,
    start_now: Collection[str] = (),
    settings: dict[str, Any] | None = None,
) -> list[Event]:
    """The write-ahead intent of one reply, all to be appended in one transaction.

    The message (its call ids made unique in the run by ``unique_call_ids``: ``admissions``,
    ``consent`` and ``start_now`` name calls by those ids); one request per call; then, for
    each call that may not run, its error result: refused by validation, beyond
    ``max_tool_calls_per_turn``, asked for in the final turn, or the ``repeat_threshold``-th
    identical call in a row, refused or not (with a ``loop_detected`` event); and a consent
    request for each remaining call whose tool's policy asks a person.

    ``settings``: the model settings the call was sent with, recorded on the message.

    ``start_now``: ids of ``non_idempotent`` calls the caller will run as soon as this
    commits; their ``tool_call_started`` (attempt 1) rides in the same commit instead of
    costing a commit (an fsync) of its own. The record still precedes the handler, so a
    crash after this commit finds the call in flight and recovers it as after any start
    record: reconcile, or a person. The caller should therefore name only calls whose tool
    has a reconcile function (which answers "not done" for a call that never ran, so no
    person is bothered); a call without one keeps its own start record, so a crash before
    it leaves a call that plainly never ran. Nothing is started early when anything in the
    turn waits for consent: the calls would wait, recorded as started, for the decision.
    Only the caller, which knows it has not run the handler yet, may run such a call
    without reconciling it first.
    """
    limits = limits or Limits()
    original = message.tool_calls
    message = unique_call_ids(state, turn_index, message)
    events: list[Event] = [
        AssistantMessageRecorded(
            turn_index=turn_index, message=message, usage=usage, model=model, settings=settings
        )
    ]
    refused: list[Event] = []
    asks: list[Event] = []
    recent = list(state.recent_calls)
    final = turn_index >= limits.max_turns - 1
    for i, call in enumerate(message.tool_calls):
        v = admissions.get(call.id) or admissions[original[i].id]
        digest = call_digest(call.name, v.arguments)
        repeats = 1
        for prior in reversed(recent):
            if prior != digest:
                break
            repeats += 1
        recent.append(digest)
        position, last = (0, False) if v.output else (i, final)
        if (
            v.rejection is None
            and not last
            and position < limits.max_tool_calls_per_turn
            and repeats < limits.repeat_threshold
        ):
            bounded = _UNBOUNDED  # what _bounded says of it, without the call
        else:
            bounded = _bounded(call.id, call.name, v.rejection, position, repeats, last, limits)
        request, results, ask = _call_intent(
            state.run_id, turn_index, call, v, bounded, repeats, consent
        )
        events.append(request)
        refused.extend(results)
        if ask is not None:
            asks.append(ask)
    events += refused  # in place: no new list per part, on every model turn
    if start_now and not asks:
        events += _early_starts(state.run_id, turn_index, events, start_now)
    else:
        events += asks
    return events


def _call_intent(
    run_id: str,
    turn_index: int,
    call: ToolCall,
    admission: CallAdmission,
    bounded: tuple[str | None, ResultSource, bool],
    repeats: int,
    consent: Consent | None,
) -> tuple[ToolCallRequested, list[Event], Event | None]:
    """One call's part of the intent: its request; the loop record and error result of a
    call that may not run; or the consent request of one whose tool asks a person."""
    rejection, source, loop = bounded
    needs = rejection is None and admission.needs_approval
    request = ToolCallRequested(
        turn_index=turn_index,
        tool_call_id=call.id,
        name=call.name,
        arguments=admission.arguments,
        effect_class=admission.effect_class,
        idempotency_key=idempotency_key(run_id, call.id),
        rejection=rejection,
        requires_approval=needs,
        final=admission.output and rejection is None,
    )
    refused: list[Event] = []
    if loop:
        refused.append(
            LoopDetected(
                turn_index=turn_index, tool_call_id=call.id, name=call.name, repeats=repeats
            )
        )
    if rejection is not None:
        refused.append(
            _result(
                turn_index, call.id, call.name, rejection, is_error=True, source=source, attempt=0
            )
        )
        return request, refused, None
    if not needs:
        return request, refused, None
    if consent is None or call.id not in consent.tokens:
        raise ValueError(f"call {call.id} needs consent but no token was given")
    ask = _consent_request(
        turn_index,
        call.id,
        call.name,
        admission.arguments,
        consent.tokens[call.id],
        consent.deadline,
    )
    return request, refused, ask


_UNBOUNDED: tuple[str | None, ResultSource, bool] = (None, "rejected", False)
"""``_bounded`` of a call no limit refuses: no rejection, not a loop."""


def _bounded(
    call_id: str,
    name: str,
    rejection: str | None,
    position: int,
    repeats: int,
    final: bool,
    limits: Limits,
) -> tuple[str | None, ResultSource, bool]:
    """Whether the limits refuse a call: (its rejection or None, the result's source, whether
    it is the ``repeat_threshold``-th identical call in a row, a loop). A call refused by
    validation keeps its rejection; a loop is added to it (refused calls count too: a model
    that repeats an unknown tool or arguments that fail the schema is in a loop as much as
    one repeating a call that runs)."""
    if rejection is None and final:
        return (
            f"not run: the run reached its limit of {limits.max_turns} turns and tools are "
            "no longer available; answer with what you have",
            "limit",
            False,
        )
    if rejection is None and position >= limits.max_tool_calls_per_turn:
        return (
            f"not run: at most {limits.max_tool_calls_per_turn} tool calls are honoured "
            "per turn; ask for the rest in your next turn",
            "limit",
            False,
        )
    if repeats >= limits.repeat_threshold:
        looped = (
            f"not run: this is the same call ({name} with the same arguments) "
            f"{repeats} times in a row, which looks like a loop. It will not produce a "
            "different result; try a different strategy or different arguments."
        )
        return (looped if rejection is None else f"{rejection}\n\n{looped}", "loop", True)
    return rejection, "rejected", False


def _early_starts(
    run_id: str, turn_index: int, events: list[Event], start_now: Collection[str]
) -> list[Event]:
    """The ``tool_call_started`` records that ride in the intent's commit (see
    ``reply_events``): attempt 1 of each admitted ``non_idempotent`` call in ``start_now``."""
    return [
        ToolCallStarted(
            turn_index=turn_index,
            tool_call_id=e.tool_call_id,
            attempt=1,
            effect_id=effect_id(run_id, turn_index, e.tool_call_id, 1),
        )
        for e in events
        if isinstance(e, ToolCallRequested)
        and e.rejection is None
        and e.effect_class == "non_idempotent"
        and e.tool_call_id in start_now
    ]


def _consent_request(
    turn_index: int, call_id: str, name: str, arguments: str, token: str, deadline: float | None
) -> ApprovalRequested:
    return ApprovalRequested(
        turn_index=turn_index,
        tool_call_id=call_id,
        reason="policy",
        payload={
            "tool": name,
            "arguments": _loads_or_raw(arguments),
            "question": "May this call run? approve, approve with edited arguments, or deny "
            "with a reason the model will read.",
        },
        token=token,
        deadline=deadline,
    )


def consent_events(call: CallState, token: str, deadline: float | None) -> list[Event]:
    """Ask (again) for consent to run a gated call, e.g. after a timeout and a resume."""
    return [
        _consent_request(
            call.turn_index, call.tool_call_id, call.name, call.arguments, token, deadline
        )
    ]


def started_event(state: RunState, call: CallState, attempt: int) -> ToolCallStarted:
    """Record that a handler is about to run."""
    return ToolCallStarted(
        turn_index=call.turn_index,
        tool_call_id=call.tool_call_id,
        attempt=attempt,
        effect_id=effect_id(state.run_id, call.turn_index, call.tool_call_id, attempt),
    )


def needs_start_record(call: CallState) -> bool:
    """Only non_idempotent calls pay for a durable ``tool_call_started``.

    For them it separates "never ran" (safe to run) from "may have run" (reconcile or ask);
    the other classes are rerun either way, so the extra fsync would buy nothing.
    """
    return call.effect_class == "non_idempotent"


def ask_human_events(
    state: RunState, call: CallState, token: str, reason: str, deadline: float | None = None
) -> list[Event]:
    """An in-flight call nothing can settle: declare it unknown and wait for a person."""
    events: list[Event] = []
    if not call.unknown:
        events.append(
            ToolOutcomeUnknown(
                turn_index=call.turn_index, tool_call_id=call.tool_call_id, reason=reason
            )
        )
    events.append(
        ApprovalRequested(
            turn_index=call.turn_index,
            tool_call_id=call.tool_call_id,
            reason="outcome_unknown",
            payload={
                "tool": call.name,
                "arguments": _loads_or_raw(call.arguments),
                "idempotency_key": call.idempotency_key,
                "question": "Did this call happen? Answer happened (with its result), "
                "not_happened (run it) or skip.",
                "why": reason,
            },
            token=token,
            deadline=deadline,
        )
    )
    return events


def reconcile_events(
    state: RunState,
    call: CallState,
    verdict: Literal["done", "not_done", "unknown"],
    content: str,
    token: str,
    deadline: float | None = None,
) -> list[Event]:
    """Events for a reconcile function's answer about an in-flight call."""
    events: list[Event] = [
        ToolReconciled(turn_index=call.turn_index, tool_call_id=call.tool_call_id, verdict=verdict)
    ]
    if verdict == "done":
        events.append(
            _call_result(call, content, is_error=False, source="reconciled", attempt=call.attempts)
        )
    elif verdict == "unknown":
        events.extend(ask_human_events(state, call, token, "reconcile could not tell", deadline))
    return events


def decision_events(
    state: RunState,
    tool_call_id: str,
    decision: Decision,
    *,
    token: str | None = None,
    by: str = "",
    reason: str = "",
    result: str | None = None,
    arguments: Any = None,
    now: float | None = None,
) -> list[Event]:
    """Validate a person's decision against the pending approval and build its events.

    Raises ``ApprovalError`` (and nothing is written) when there is no such pending approval,
    the token does not match, the deadline passed, or the decision does not fit the question.
    ``arguments`` must already be validated against the tool's schema by the caller.
    """
    _check_decision(state, tool_call_id, decision, token, now)
    call = state.calls[tool_call_id]
    edited: str | None = None
    if arguments is not None:
        if decision != "approve":
            raise ApprovalError("edited arguments only go with approve")
        try:
            edited = arguments if isinstance(arguments, str) else canonical_json(arguments)
        except ValueError as exc:
            raise ApprovalError(f"edited arguments are not JSON: {exc}") from exc
    if decision == "deny" and not reason:
        raise ApprovalError("a denial needs a reason: the model reads it")
    if decision in ("happened", "answer") and result is None:
        raise ApprovalError(f"{decision!r} needs the call's result (what the model should read)")
    events: list[Event] = [
        ApprovalDecided(
            turn_index=call.turn_index,
            tool_call_id=tool_call_id,
            decision=decision,
            by=by,
            reason=reason,
            arguments=edited,
        )
    ]
    if decision in ("happened", "answer"):
        assert result is not None
        events.append(_decided_result(call, result, is_error=False))
    elif decision == "deny":
        events.append(_decided_result(call, f"A person denied this call: {reason}", is_error=True))
    elif decision == "skip":
        text = f"A person chose to skip this call: {reason or 'no reason given'}"
        events.append(_decided_result(call, text, is_error=True))
    return events


def _check_decision(
    state: RunState, tool_call_id: str, decision: Decision, token: str | None, now: float | None
) -> None:
    """Refuse a decision that does not fit the pending approval (``ApprovalError``): none
    pending for the call, a token that does not match (compared in constant time), a passed
    deadline, or an answer to another question."""
    pending = state.approvals.get(tool_call_id)
    if state.status is not RunStatus.AWAITING_APPROVAL or pending is None:
        waiting = ", ".join(state.approvals) or "none"
        raise ApprovalError(
            f"run {state.run_id} has no pending approval for call {tool_call_id!r} "
            f"(status {state.status.value if state.status else None}, pending: {waiting}); "
            "it may already be decided"
        )
    if token is not None and not hmac.compare_digest(
        token.encode("utf-8", "surrogatepass"), pending.token.encode("utf-8", "surrogatepass")
    ):
        raise ApprovalError("the resume token does not match the pending approval")
    if now is not None and pending.deadline is not None and now > pending.deadline:
        raise ApprovalError("the approval's deadline has passed; the run times out instead")
    asks, allowed = _QUESTIONS[pending.reason]
    if decision not in allowed:
        raise ApprovalError(f"this approval asks {asks}; answer one of {allowed}, not {decision!r}")


_QUESTIONS: dict[str, tuple[str, list[str]]] = {
    "outcome_unknown": ("whether the call happened", ["happened", "not_happened", "skip"]),
    "policy": ("for consent", ["approve", "deny"]),
    "question": ("a question, not a decision: answer it with Runtime.answer", ["answer"]),
    "child": ("nothing of a person: the child run's end is its result (cancel the run)", []),
}


def _decided_result(call: CallState, content: str, *, is_error: bool) -> ToolResultRecorded:
    """The result a person's decision gives a call (source ``approval``)."""
    return _call_result(call, content, is_error=is_error, source="approval", attempt=call.attempts)


def cancel_events(state: RunState, reason: str) -> list[Event]:
    """Cancel a run: a synthetic ``cancelled`` result for every open call, then the end.

    A non_idempotent call that had started may have taken effect; its result says so, so the
    model (and a person reading the history) does not assume it did not happen. Calls of the
    reply whose intent was never written are recorded as refused first, so each has exactly
    one result.
    """
    events: list[Event] = []
    reply = state.last_assistant()
    for cid in state.unrequested_calls():
        assert reply is not None
        call = next(c for c in reply.tool_calls if c.id == cid)
        text = f"cancelled before it ran: {reason}."
        events.append(
            ToolCallRequested(
                turn_index=state.turn_index,
                tool_call_id=cid,
                name=call.name,
                arguments=call.arguments,
                effect_class=None,
                idempotency_key=idempotency_key(state.run_id, cid),
                rejection=text,
            )
        )
        events.append(
            _result(
                state.turn_index, cid, call.name, text, is_error=True, source="cancelled", attempt=0
            )
        )
    for c in state.pending_calls():
        maybe = " It had started and may or may not have taken effect." if c.in_flight else ""
        text = f"cancelled before it finished: {reason}.{maybe}"
        events.append(_call_result(c, text, is_error=True, source="cancelled", attempt=c.attempts))
    events.append(RunCancelled(reason=reason))
    return events


def timeout_events(state: RunState, now: float) -> list[Event]:
    """``run_timed_out`` when a pending approval's deadline, or the run's, has passed."""
    if deadline_passed(state, now):
        return run_timeout_events(state, now)
    if state.status is not RunStatus.AWAITING_APPROVAL:
        return []
    late = [a for a in state.approvals.values() if a.deadline is not None and a.deadline < now]
    if not late:
        return []
    ids = ", ".join(a.tool_call_id for a in late)
    return [RunTimedOut(reason=f"no decision on {ids} before the approval deadline")]


def _loads_or_raw(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
