"""A run's log as steps: one entry a turn, with its model call and its tool calls, each with
when it started, how long it took, how many attempts and how the last one failed, and how
long the run waited on a person. What a compact timeline (a waterfall of model and tool
time) is drawn from; read from the durable log only, so any process can show it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from stead.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageRecorded,
    ModelCallFailed,
    RunCompleted,
    RunCreated,
    RunFailed,
    ToolAttemptFailed,
    ToolCallRequested,
    ToolCallStarted,
    ToolOutcomeUnknown,
    ToolResultRecorded,
    TurnStarted,
)
from stead.core.messages import Usage
from stead.store import StoredEvent

CallKind = Literal["tool", "question", "output"]
"""What a call is to a person: a tool call, a question to a person (a question tool), or
the run's typed answer (the output tool)."""

CallStatus = Literal["done", "error", "running", "waiting", "unknown", "requested"]


@dataclass(slots=True, kw_only=True)
class CallStep:
    """One tool call of a turn."""

    call_id: str
    name: str
    kind: CallKind
    effect_class: str | None
    arguments: str
    requested_at: float
    started_at: float | None = None
    """When its last attempt was recorded as started (None: a question, or a ``read_only``
    call, whose start is not recorded: ``requested_at`` is the nearest)."""
    ended_at: float | None = None
    """When its result was recorded."""
    attempts: int = 0
    last_failure: str | None = None
    """The error of its latest failed attempt, or why its outcome is unknown."""
    status: CallStatus = "requested"
    source: str | None = None
    """How its result came: executed, replayed, reconciled, answered ..."""
    result: str | None = None
    waited_s: float = 0.0
    """Seconds it waited on a person (a question, an approval, an unknown outcome)."""


@dataclass(slots=True, kw_only=True)
class TurnStep:
    """One turn: its model call (all attempts) and the calls its reply asked for."""

    turn_index: int
    started_at: float
    model_s: float | None = None
    """From the turn's start to its reply (None while the model is still answering)."""
    model_attempts: int = 1
    model_failure: str | None = None
    """The code and message of the latest failed model attempt of the turn."""
    model: str = ""
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    ended_at: float | None = None
    """When the turn's last step ended."""
    calls: list[CallStep] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class RunSteps:
    """The whole run as steps."""

    created_at: float
    ended_at: float | None
    """When the run completed or failed (None while it has not)."""
    waited_s: float
    """Seconds the run waited on a person, over all its calls."""
    turns: list[TurnStep]


def steps_of(events: Sequence[StoredEvent], *, now: float) -> RunSteps:
    """The run's steps from its log (in order). Pure: times are the events' own, and a call
    still waiting on a person has waited until ``now``."""
    created = events[0].created_at if events else 0.0
    ended: float | None = None
    turns: list[TurnStep] = []
    calls: dict[str, CallStep] = {}
    asked: dict[str, float] = {}
    for stored in events:
        e, at = stored.event, stored.created_at
        turn = turns[-1] if turns else None
        match e:
            case RunCreated():
                created = at
            case TurnStarted():
                if turn is not None and turn.turn_index == e.turn_index:
                    continue  # the same turn started again after a restart
                turns.append(TurnStep(turn_index=e.turn_index, started_at=at))
            case ModelCallFailed() if turn is not None:
                turn.model_attempts = e.attempt + 1
                turn.model_failure = f"{e.code}: {e.message}" if e.message else e.code
            case AssistantMessageRecorded() if turn is not None:
                turn.model_s = at - turn.started_at
                turn.model, turn.text, turn.usage = e.model, e.message.text, e.usage
                turn.ended_at = at
            case ToolCallRequested() if turn is not None:
                call = CallStep(
                    call_id=e.tool_call_id,
                    name=e.name,
                    kind="output" if e.final else "tool",
                    effect_class=str(e.effect_class) if e.effect_class else None,
                    arguments=e.arguments,
                    requested_at=at,
                    status="error" if e.rejection else "requested",
                    last_failure=e.rejection,
                )
                calls[e.tool_call_id] = call
                turn.calls.append(call)
            case ToolCallStarted() if e.tool_call_id in calls:
                call = calls[e.tool_call_id]
                call.started_at, call.attempts, call.status = at, e.attempt, "running"
            case ToolAttemptFailed() if e.tool_call_id in calls:
                calls[e.tool_call_id].last_failure = e.error
            case ToolOutcomeUnknown() if e.tool_call_id in calls:
                call = calls[e.tool_call_id]
                call.status, call.last_failure = "unknown", e.reason
            case ApprovalRequested() if e.tool_call_id in calls:
                call = calls[e.tool_call_id]
                if e.reason == "question":
                    call.kind = "question"
                call.status = "waiting"
                asked[e.tool_call_id] = at
            case ApprovalDecided() if e.tool_call_id in calls:
                since = asked.pop(e.tool_call_id, None)
                if since is not None:
                    calls[e.tool_call_id].waited_s += at - since
            case ToolResultRecorded() if e.tool_call_id in calls:
                call = calls[e.tool_call_id]
                call.ended_at, call.result, call.source = at, e.content, e.source
                call.attempts = max(call.attempts, e.attempt)
                call.status = "error" if e.is_error else "done"
                if turn is not None:
                    turn.ended_at = at
            case RunCompleted() | RunFailed():
                ended = at
            case _:
                pass
    for call_id, since in asked.items():  # still waiting
        calls[call_id].waited_s += max(0.0, now - since)
    waited = sum(c.waited_s for c in calls.values())
    return RunSteps(created_at=created, ended_at=ended, waited_s=waited, turns=turns)
