"""Given a run's folded state, what happens next. Pure: no I/O, no clock, no randomness.

``next_step(state, tools)`` returns one ``Step``; the runtime performs it and appends what
happened. Recovery after a crash is not a special path: a resumed run is folded and asked the
same question, and the answer for a call that was in flight follows DESIGN.md's Guarantee 3:

* ``read_only`` — run it again.
* ``idempotent_write`` — run it again; it carries the same idempotency key.
* ``non_idempotent`` — never run again blindly: reconcile (if the tool can), else a person
  decides (``awaiting_approval``). A call whose intent was recorded but which never started
  is not in flight and simply runs.

The small ``*_events`` builders turn an answer (a reconcile verdict, a human decision) into
the events to append, validating it against the state first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from stead.core.canonical import canonical_json, effect_id, idempotency_key
from stead.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageRecorded,
    Decision,
    EffectClass,
    Event,
    RunCancelled,
    RunCompleted,
    RunFailed,
    ToolCallRequested,
    ToolCallStarted,
    ToolOutcomeUnknown,
    ToolReconciled,
    ToolResultRecorded,
    TurnStarted,
)
from stead.core.fold import CallState, RunState
from stead.core.messages import AssistantMessage, Usage
from stead.core.states import FINISHED, RunStatus
from stead.errors import ApprovalError


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the core needs to know of a registered tool (not its code)."""

    effect_class: EffectClass
    """Side-effect class."""
    has_reconcile: bool = False
    """Whether it offers a status-check function for in-flight calls."""


# -- steps ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StartRun:
    """A queued run: record run_started."""

    kind: Literal["start_run"] = "start_run"
    """Tag."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeTurn:
    """A requeued run whose last turn has open calls: record turn_resumed."""

    kind: Literal["resume_turn"] = "resume_turn"
    """Tag."""
    turn_index: int
    """The open turn."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallModel:
    """Ask the model for turn ``turn_index``."""

    kind: Literal["call_model"] = "call_model"
    """Tag."""
    turn_index: int
    """Which turn."""
    turn_recorded: bool
    """turn_started is already in the log (a retry or a resume mid-call)."""
    attempt: int
    """1 + failed attempts so far in this turn."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPlan:
    """What to do with one unsettled call."""

    tool_call_id: str
    """The call."""
    action: Literal["execute", "reconcile", "ask_human"]
    """Run the handler, ask the reconcile function, or pause for a person."""
    attempt: int
    """The attempt number an execute would use."""
    reason: str
    """Why (shown in the timeline)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTools:
    """Settle the open calls of the current turn."""

    kind: Literal["run_tools"] = "run_tools"
    """Tag."""
    plans: tuple[ToolPlan, ...]
    """One plan per unsettled call, in the model's order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """The last reply has no tool calls: complete the run."""

    kind: Literal["finish"] = "finish"
    """Tag."""
    output: str
    """The final answer."""
    stop_reason: str
    """Why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fail:
    """The run cannot go on: record run_failed."""

    kind: Literal["fail"] = "fail"
    """Tag."""
    code: str
    """Stable failure code."""
    phase: str
    """model | tool | runtime."""
    message: str
    """Detail for a person."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    """Nothing a worker can do: finished, or waiting on a person."""

    kind: Literal["wait"] = "wait"
    """Tag."""
    status: RunStatus
    """The status it rests in."""


Step: TypeAlias = StartRun | ResumeTurn | CallModel | RunTools | Finish | Fail | Wait


def plan_call(call: CallState, spec: ToolSpec | None) -> ToolPlan:
    """Recovery rule for one unsettled call (Guarantee 3)."""
    nxt = call.attempts + 1
    if call.decision in ("approve", "not_happened"):
        return ToolPlan(
            tool_call_id=call.tool_call_id,
            action="execute",
            attempt=nxt,
            reason=f"a person decided {call.decision}",
        )
    if not call.in_flight:
        return ToolPlan(
            tool_call_id=call.tool_call_id, action="execute", attempt=nxt, reason="not started"
        )
    effect = call.effect_class
    if effect == "read_only":
        return ToolPlan(
            tool_call_id=call.tool_call_id,
            action="execute",
            attempt=nxt,
            reason="read_only: safe to run again",
        )
    if effect == "idempotent_write":
        return ToolPlan(
            tool_call_id=call.tool_call_id,
            action="execute",
            attempt=nxt,
            reason="idempotent_write: run again with the same idempotency key",
        )
    # non_idempotent (or a tool that vanished): never blindly again.
    if call.verdict == "not_done":
        return ToolPlan(
            tool_call_id=call.tool_call_id,
            action="execute",
            attempt=nxt,
            reason="reconcile said it did not happen",
        )
    if call.verdict is None and spec is not None and spec.has_reconcile:
        return ToolPlan(
            tool_call_id=call.tool_call_id,
            action="reconcile",
            attempt=nxt,
            reason="in flight when its worker died; asking its reconcile function",
        )
    why = (
        "reconcile could not tell whether it happened"
        if call.verdict == "unknown"
        else "in flight when its worker died and it has no reconcile function"
    )
    return ToolPlan(tool_call_id=call.tool_call_id, action="ask_human", attempt=nxt, reason=why)


def next_step(state: RunState, tools: Mapping[str, ToolSpec], max_turns: int = 50) -> Step:
    """The one thing to do next for this run."""
    step = _next_step(state, tools)
    if isinstance(step, CallModel) and not step.turn_recorded and step.turn_index >= max_turns:
        return Fail(
            code="max_turns",
            phase="runtime",
            message=f"the run used its {max_turns} turns without finishing",
        )
    return step


def automatic_events(state: RunState, step: Step) -> list[Event]:
    """Bookkeeping a step needs before any effect: it can ride in the commit that led to it.

    Opening the next turn once the last result is in, or completing the run once a reply
    without tool calls is in, involves no effect, so the runtime appends these in the same
    transaction as the events that made them due. That saves an fsync per turn without
    weakening any guarantee: each is durable before the effect it precedes.
    """
    match step:
        case CallModel(turn_recorded=False):
            return [TurnStarted(turn_index=step.turn_index)]
        case Finish():
            return [
                RunCompleted(output=step.output, stop_reason=step.stop_reason, usage=state.usage)
            ]
        case Fail():
            return [
                RunFailed(
                    code=step.code, phase=step.phase, message=step.message, last_seq=state.seq
                )
            ]
        case _:
            return []


def _next_step(state: RunState, tools: Mapping[str, ToolSpec]) -> Step:
    status = state.status
    if status is None:
        raise ValueError("empty run state")
    if status in FINISHED or status is RunStatus.AWAITING_APPROVAL:
        return Wait(status=status)
    if status is RunStatus.QUEUED:
        return StartRun()
    pending = state.pending_calls()
    if status is RunStatus.RUNNING:
        if state.turn_index >= 0 and state.turn_has_reply:
            if pending:
                return ResumeTurn(turn_index=state.turn_index)
            reply = state.last_assistant()
            assert reply is not None
            if not reply.tool_calls:
                return Finish(output=reply.text, stop_reason=reply.stop_reason)
            return CallModel(turn_index=state.turn_index + 1, turn_recorded=False, attempt=1)
        if state.turn_index >= 0:  # turn started, no reply yet: (re)issue the call
            return CallModel(
                turn_index=state.turn_index,
                turn_recorded=True,
                attempt=state.model_failures + 1,
            )
        return CallModel(turn_index=0, turn_recorded=False, attempt=1)
    # awaiting_tool
    if not pending:
        return CallModel(turn_index=state.turn_index + 1, turn_recorded=False, attempt=1)
    plans = tuple(plan_call(c, tools.get(c.name)) for c in pending)
    return RunTools(plans=plans)


# -- event builders --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CallVerdict:
    """The runtime's validation of one requested call, before any intent is written."""

    tool_call_id: str
    """The call."""
    arguments: str
    """Canonical JSON when valid; the raw text otherwise."""
    effect_class: EffectClass | None
    """The tool's class, None when unknown."""
    rejection: str | None
    """None when the call may run; otherwise the error the model will read."""


def reply_events(
    state: RunState,
    turn_index: int,
    message: AssistantMessage,
    usage: Usage,
    model: str,
    verdicts: Mapping[str, CallVerdict],
) -> list[Event]:
    """The write-ahead intent of one reply: the message, each call's request, and an error
    result for every call refused before running, all to be appended in one transaction."""
    events: list[Event] = [
        AssistantMessageRecorded(turn_index=turn_index, message=message, usage=usage, model=model)
    ]
    for call in message.tool_calls:
        v = verdicts[call.id]
        events.append(
            ToolCallRequested(
                turn_index=turn_index,
                tool_call_id=call.id,
                name=call.name,
                arguments=v.arguments,
                effect_class=v.effect_class,
                idempotency_key=idempotency_key(state.run_id, call.id),
                rejection=v.rejection,
            )
        )
    for call in message.tool_calls:
        v = verdicts[call.id]
        if v.rejection is not None:
            events.append(
                ToolResultRecorded(
                    turn_index=turn_index,
                    tool_call_id=call.id,
                    name=call.name,
                    content=v.rejection,
                    is_error=True,
                    source="rejected",
                    attempt=0,
                )
            )
    return events


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


def ask_human_events(state: RunState, call: CallState, token: str, reason: str) -> list[Event]:
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
        )
    )
    return events


def reconcile_events(
    state: RunState,
    call: CallState,
    verdict: Literal["done", "not_done", "unknown"],
    content: str,
    token: str,
) -> list[Event]:
    """Events for a reconcile function's answer about an in-flight call."""
    events: list[Event] = [
        ToolReconciled(turn_index=call.turn_index, tool_call_id=call.tool_call_id, verdict=verdict)
    ]
    if verdict == "done":
        events.append(
            ToolResultRecorded(
                turn_index=call.turn_index,
                tool_call_id=call.tool_call_id,
                name=call.name,
                content=content,
                source="reconciled",
                attempt=call.attempts,
            )
        )
    elif verdict == "unknown":
        events.extend(ask_human_events(state, call, token, "reconcile could not tell"))
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
) -> list[Event]:
    """Validate a person's decision against the pending approval and build its events.

    Raises ``ApprovalError`` (and nothing is written) when there is no such pending approval,
    the token does not match, or the decision does not fit the question asked.
    """
    pending = state.approvals.get(tool_call_id)
    if state.status is not RunStatus.AWAITING_APPROVAL or pending is None:
        waiting = ", ".join(state.approvals) or "none"
        raise ApprovalError(
            f"run {state.run_id} has no pending approval for call {tool_call_id!r} "
            f"(status {state.status}, pending: {waiting}); it may already be decided"
        )
    if token is not None and token != pending.token:
        raise ApprovalError("the resume token does not match the pending approval")
    call = state.calls[tool_call_id]
    unknown = pending.reason == "outcome_unknown"
    allowed = {"happened", "not_happened", "skip"} if unknown else {"approve", "deny"}
    if decision not in allowed:
        raise ApprovalError(
            f"this approval asks {'whether the call happened' if unknown else 'for consent'}; "
            f"answer one of {sorted(allowed)}, not {decision!r}"
        )
    edited: str | None = None
    if arguments is not None:
        if decision != "approve":
            raise ApprovalError("edited arguments only go with approve")
        edited = arguments if isinstance(arguments, str) else canonical_json(arguments)
    decided = ApprovalDecided(
        turn_index=call.turn_index,
        tool_call_id=tool_call_id,
        decision=decision,
        by=by,
        reason=reason,
        arguments=edited,
    )
    events: list[Event] = [decided]
    if decision == "happened":
        if result is None:
            raise ApprovalError("'happened' needs the call's result (what the model should read)")
        events.append(
            ToolResultRecorded(
                turn_index=call.turn_index,
                tool_call_id=tool_call_id,
                name=call.name,
                content=result,
                source="approval",
                attempt=call.attempts,
            )
        )
    elif decision in ("deny", "skip"):
        text = (
            f"A person denied this call: {reason}"
            if decision == "deny"
            else f"A person chose to skip this call: {reason or 'no reason given'}"
        )
        events.append(
            ToolResultRecorded(
                turn_index=call.turn_index,
                tool_call_id=tool_call_id,
                name=call.name,
                content=text,
                is_error=True,
                source="approval",
                attempt=call.attempts,
            )
        )
    return events


def cancel_events(state: RunState, reason: str) -> list[Event]:
    """Cancel a run: a synthetic ``cancelled`` result for every open call, then the end."""
    events: list[Event] = [
        ToolResultRecorded(
            turn_index=c.turn_index,
            tool_call_id=c.tool_call_id,
            name=c.name,
            content=f"cancelled: {reason}",
            is_error=True,
            source="cancelled",
            attempt=c.attempts,
        )
        for c in state.pending_calls()
    ]
    events.append(RunCancelled(reason=reason))
    return events


def _loads_or_raw(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text
