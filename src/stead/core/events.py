"""The events of a run's log: typed, frozen, versioned, named in the past tense.

Each event is a frozen dataclass with a ``kind`` tag. ``encode`` turns one into
``(kind, version, json_dict)`` for the store; ``decode`` is its inverse and refuses anything
it does not recognise (unknown kind, newer version, missing or mistyped field) with
``ValueError`` so the store can report the exact corrupt row.

One codec (``stead.core.codec``) serves all three: each kind's ``Record``, compiled once from
its field table, is the encoder, the reader and the writer's check, so ``problem`` applies to a
live event exactly the rules ``decode`` applies to its row, and the store refuses what it finds
before the commit: whatever a store accepted reads back equal.
Text from outside (a model's reply, a tool's result, an error message) is made storable
where it enters instead: see ``stead.core.messages.repair_text``.

Versioning: ``VERSION[kind]`` is the schema version written today. A row of an older version
is upgraded by the upcasters of ``_UPGRADES`` (a ``codec.Versions`` per kind, as the snapshot
has one) before it is read; a newer version than this code knows is refused, not guessed at.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final, Literal, TypeAlias

from stead.core.canonical import JSON
from stead.core.codec import NUL_FREE_STR, Record, Upcaster, Versions, integer
from stead.core.messages import (
    AssistantMessage,
    Usage,
    repair_note,
    repair_text,
    unstorable,
)

EffectClass = Literal["read_only", "idempotent_write", "non_idempotent"]
EFFECT_CLASSES: Final = ("read_only", "idempotent_write", "non_idempotent")

ResultSource = Literal[
    "executed", "reconciled", "rejected", "approval", "cancelled", "limit", "loop"
]
"""Where a tool result came from: the handler ran, the reconcile function found it, the call
was refused before running, a person decided, or the run was cancelled or bounded."""

Decision = Literal["approve", "deny", "happened", "not_happened", "skip"]


def _repair_field(event: Any, name: str, where: str) -> None:
    """Make one text field of an event being constructed storable, noting the repair."""
    value = getattr(event, name)
    if isinstance(value, str) and unstorable(value):
        fixed, n = repair_text(value)
        object.__setattr__(event, name, f"{fixed}\n\n{repair_note((n, where))}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCreated:
    """A run exists, with everything needed to start it on any machine."""

    kind: ClassVar[str] = "run_created"
    run_id: str
    """The run's id."""
    agent: str
    """Name of the agent definition that drives it (looked up by name on resume)."""
    input: str
    """The user input that starts the conversation."""
    session_id: str = ""
    """Groups runs of one conversation or user session."""
    correlation_id: str = ""
    """The caller's id for tracing this run through their systems."""
    config: dict[str, Any] | None = None
    """Per-run settings (limits, model overrides), JSON."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    """A worker began driving a queued run."""

    kind: ClassVar[str] = "run_started"
    owner: str
    """The worker that claimed it."""
    epoch: int
    """Its fencing epoch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecovered:
    """A new owner took over a run whose previous owner died or lost its lease."""

    kind: ClassVar[str] = "run_recovered"
    owner: str
    """The new owner."""
    epoch: int
    """The new fencing epoch."""
    previous_owner: str = ""
    """Who held it before, if known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted:
    """A model call for turn ``turn_index`` is about to be made."""

    kind: ClassVar[str] = "turn_started"
    turn_index: int
    """Counts from 0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResumed:
    """An interrupted turn with unfinished tool calls is being continued after a requeue."""

    kind: ClassVar[str] = "turn_resumed"
    turn_index: int
    """The open turn."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeInjected:
    """The runtime added a system notice to the conversation (e.g. "this is your last turn")."""

    kind: ClassVar[str] = "notice_injected"
    turn_index: int
    """The turn whose request carries it."""
    content: str
    """What the model reads."""
    reason: str = ""
    """Why: final_turn, ..."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallFailed:
    """One attempt of a model call failed; retried or not according to ``code``."""

    kind: ClassVar[str] = "model_call_failed"
    turn_index: int
    """The turn."""
    attempt: int
    """1 for the first attempt."""
    code: str
    """Stable failure code (stead.core.failures)."""
    message: str = ""
    """Human-readable detail."""
    usage: Usage | None = None
    """Tokens the failed attempt consumed (counted in the run's usage), if known."""

    def __post_init__(self) -> None:
        _repair_field(self, "message", "in this message")  # a provider's error text


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessageRecorded:
    """The model's final reply for a turn. Its tool calls are the write-ahead intent."""

    kind: ClassVar[str] = "assistant_message"
    turn_index: int
    """The turn."""
    message: AssistantMessage
    """Text and tool calls."""
    usage: Usage
    """Tokens this call consumed."""
    model: str = ""
    """Which model answered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRequested:
    """Intent: this call will run (or is refused, when ``rejection`` is set). Written first."""

    kind: ClassVar[str] = "tool_call_requested"
    turn_index: int
    """The turn."""
    tool_call_id: str
    """The model's call id."""
    name: str
    """Tool name as the model gave it."""
    arguments: str
    """Canonical JSON of the arguments, or the raw text when it did not parse."""
    effect_class: EffectClass | None
    """The tool's side-effect class; None for an unknown tool."""
    idempotency_key: str
    """sha256(run_id + tool_call_id), hex; the call id is unique in the run (see
    ``stead.core.builders.unique_call_ids``), so the key is too."""
    rejection: str | None = None
    """Why the call may not run (unknown tool, bad JSON, schema failure); None when valid."""
    requires_approval: bool = False
    """The tool's policy wants a person's consent before this call runs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopDetected:
    """The model repeated the same call (tool and canonical arguments) too many times in a row;
    this call is not run and gets an error result asking for another strategy."""

    kind: ClassVar[str] = "loop_detected"
    turn_index: int
    """The turn."""
    tool_call_id: str
    """The intercepted call."""
    name: str
    """Its tool."""
    repeats: int
    """How many identical calls in a row, this one included."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    """A handler is about to run (recorded for non_idempotent tools, where it matters)."""

    kind: ClassVar[str] = "tool_call_started"
    turn_index: int
    """The turn."""
    tool_call_id: str
    """The call."""
    attempt: int
    """1 for the first attempt."""
    effect_id: str
    """Deterministic id of this attempt."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultRecorded:
    """The one result of a tool call. Unique per (run, turn_index, tool_call_id)."""

    kind: ClassVar[str] = "tool_result_recorded"
    turn_index: int
    """The turn."""
    tool_call_id: str
    """The call."""
    name: str
    """Tool name."""
    content: str
    """What the model reads."""
    is_error: bool = False
    """True for failures, refusals and cancellations."""
    source: ResultSource = "executed"
    """How the result was obtained."""
    attempt: int = 1
    """Which attempt produced it."""

    def __post_init__(self) -> None:
        # A tool's output (os.listdir() of a folder whose name is not UTF-8, a handler's
        # error message) is text from outside: made storable here, with a note, so the one
        # result is recorded and the handler is not run again on every attempt.
        _repair_field(self, "content", "in this result")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutcomeUnknown:
    """A call was in flight when its worker died and nothing can tell whether it happened."""

    kind: ClassVar[str] = "tool_outcome_unknown"
    turn_index: int
    """The turn."""
    tool_call_id: str
    """The call."""
    reason: str
    """Why it is unknown."""

    def __post_init__(self) -> None:
        _repair_field(self, "reason", "in this reason")  # may quote a reconcile function


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolReconciled:
    """A reconcile (status-check) function answered for an in-flight call."""

    kind: ClassVar[str] = "tool_reconciled"
    turn_index: int
    """The turn."""
    tool_call_id: str
    """The call."""
    verdict: Literal["done", "not_done", "unknown"]
    """done: result follows; not_done: it will run; unknown: a person decides."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested:
    """The run pauses until a person decides about this call."""

    kind: ClassVar[str] = "approval_requested"
    turn_index: int
    """The turn."""
    tool_call_id: str
    """The call waiting on the decision."""
    reason: Literal["outcome_unknown", "policy"]
    """Unknown outcome after a crash, or the tool's approval policy."""
    payload: dict[str, Any] | None = None
    """What the person is shown (tool, arguments, context)."""
    token: str = ""
    """Single-use resume token a decision must quote."""
    deadline: float | None = None
    """When the run times out if nobody decides (seconds since the epoch), if ever."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided:
    """A person decided about a pending call."""

    kind: ClassVar[str] = "approval_decided"
    turn_index: int
    """The turn."""
    tool_call_id: str
    """The call."""
    decision: Decision
    """approve/not_happened: run it; deny/skip: error result; happened: result given."""
    by: str = ""
    """Who decided."""
    reason: str = ""
    """Why (a denial's reason is shown to the model)."""
    arguments: str | None = None
    """Edited arguments (canonical JSON) to run instead, for approve."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCompleted:
    """The run reached its goal or a stop condition."""

    kind: ClassVar[str] = "run_completed"
    output: str
    """Final answer."""
    stop_reason: str = "end_turn"
    """Why it stopped."""
    usage: Usage = Usage()  # noqa: RUF009 - Usage is frozen, sharing one default is safe
    """Aggregated usage of the whole run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFailed:
    """The run hit an unrecoverable error."""

    kind: ClassVar[str] = "run_failed"
    code: str
    """Stable failure code."""
    phase: Literal["model", "runtime"]
    """``stead.core.failures.FailurePhase``: the model call, or a step that kept failing."""
    message: str = ""
    """Detail for a person."""
    last_seq: int = 0
    """The last checkpoint (event sequence) before the failure."""
    details: dict[str, Any] | None = None
    """Structured figures (e.g. a budget breach: spent, next-turn estimate, budget)."""

    def __post_init__(self) -> None:
        _repair_field(self, "message", "in this message")  # may quote a provider or a tool


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFailed:
    """A step of the run loop raised something that is not about the lease, the store or a
    cancel (a bug, or input the run cannot take). Counted by the fold: the
    ``Limits.max_step_failures``-th failure of the same step in a row ends the run ``failed``
    (code ``step_failed``), so no claimant retries it forever. Kept small and plain text, so
    that it can be stored even when the step's own events could not."""

    kind: ClassVar[str] = "step_failed"
    step: str
    """Which step, e.g. ``call_model (turn 2)``."""
    error_type: str
    """The exception's class name."""
    message: str = ""
    """The exception's text (truncated)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCancelRequested:
    """Someone asked to cancel the run; its owner aborts in-flight work and then cancels it."""

    kind: ClassVar[str] = "run_cancel_requested"
    reason: str = ""
    """Why."""
    by: str = ""
    """Who asked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCancelled:
    """The run was aborted by a caller or signal."""

    kind: ClassVar[str] = "run_cancelled"
    reason: str = ""
    """Why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTimedOut:
    """A deadline (e.g. an approval's) passed."""

    kind: ClassVar[str] = "run_timed_out"
    reason: str = ""
    """Which deadline."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequeued:
    """An explicit resume sent a finished run back to the queue."""

    kind: ClassVar[str] = "run_requeued"
    reason: str = ""
    """Who asked, and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsListed:
    """A tool source (an MCP server) listed its tools at a drive's start, and they differ from
    the last listing of this run's log: the timeline shows a changed definition."""

    kind: ClassVar[str] = "tools_listed"
    source: str
    """The source's name."""
    tools: dict[str, Any]
    """Tool name -> its definition as listed (schema, annotations) and the effect class used."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceLinked:
    """The run's trace context (W3C ``traceparent``), so that a drive in another process, after
    a crash, continues the same trace."""

    kind: ClassVar[str] = "trace_linked"
    traceparent: str
    """``00-<trace id>-<span id>-<flags>`` of the span that recorded it."""


Event: TypeAlias = (
    RunCreated
    | RunStarted
    | RunRecovered
    | TurnStarted
    | TurnResumed
    | NoticeInjected
    | ModelCallFailed
    | AssistantMessageRecorded
    | ToolCallRequested
    | LoopDetected
    | ToolCallStarted
    | ToolResultRecorded
    | ToolOutcomeUnknown
    | ToolReconciled
    | ApprovalRequested
    | ApprovalDecided
    | RunCompleted
    | RunFailed
    | StepFailed
    | RunCancelRequested
    | RunCancelled
    | RunTimedOut
    | RunRequeued
    | ToolsListed
    | TraceLinked
)

EVENT_TYPES: Final[dict[str, type[Any]]] = {t.kind: t for t in typing.get_args(Event)}
VERSION: Final[dict[str, int]] = {k: 1 for k in EVENT_TYPES}

_UPGRADES: Final[dict[tuple[str, int], Upcaster]] = {}
"""(kind, old_version) -> function(dict) -> dict of the next version. Empty at v1."""

_VERSIONS: Final = {
    k: Versions(k, VERSION[k], {v: f for (kind, v), f in _UPGRADES.items() if kind == k})
    for k in EVENT_TYPES
}

_COLUMNS: Final = {"tool_call_id", "run_id", "agent", "session_id", "correlation_id"}
"""Fields also stored in a text column of their own: PostgreSQL text cannot hold NUL."""
TURN_INDEX: Final = integer(0, 2**31)
"""``turn_index`` is also a column of its own, an INTEGER (32 bits) in PostgreSQL."""


def _record(cls: type[Any]) -> Record:
    """An event's codec: its fields by their types, and the rules of the columns they fill."""
    nodes = {f.name: NUL_FREE_STR for f in fields(cls) if f.name in _COLUMNS}
    if "turn_index" in {f.name for f in fields(cls)}:
        nodes["turn_index"] = TURN_INDEX
    return Record(cls, nodes=nodes, label=cls.kind)


RECORDS: Final[dict[str, Record]] = {k: _record(t) for k, t in EVENT_TYPES.items()}
"""Each kind's codec: the row's data (``encode``), its reader (``decode``), and the writer's
check (``problem``) are the same record, so what the store accepts reads back equal."""
_ENCODERS: Final = {k: (VERSION[k], r.enc) for k, r in RECORDS.items()}
_CHECKS: Final = {r.cls: r for r in RECORDS.values()}


def encode(event: Event) -> tuple[str, int, dict[str, JSON]]:
    """Return ``(kind, version, data)`` where data is plain JSON (defaults left out)."""
    version, enc = _ENCODERS[event.kind]
    return event.kind, version, enc(event)  # type: ignore[misc]


def decode(kind: str, version: int, data: Any) -> Event:
    """Rebuild an event; ``ValueError`` says exactly what is wrong with the row. A row of an
    older version is upgraded first; a newer one is refused."""
    record = RECORDS.get(kind)
    if record is None:
        raise ValueError(f"unknown event kind {kind!r}")
    if not isinstance(data, dict):
        raise ValueError("event data is not a JSON object")
    return typing.cast(Event, record.dec(_VERSIONS[kind].upcast(version, data)))


def problem(event: Any) -> tuple[str, str] | None:
    """``(field, what is wrong)`` when ``decode`` would not read ``event`` back equal after
    ``encode``, else None: the event's own record, checked. Text UTF-8 cannot hold is
    checked on the encoded row instead (``unstorable_field``): one O(1) test there covers
    every string."""
    record = _CHECKS.get(type(event))
    if record is None:
        return "kind", f"{type(event).__name__} is not an event class"
    if record.ok(event):
        return None
    return record.field_problem(event) or ("?", "refused")  # pragma: no branch


def unstorable_field(data: dict[str, JSON]) -> str:
    """The name of the first field of encoded ``data`` holding text UTF-8 cannot encode."""
    for name, value in data.items():
        if _has_unstorable(value):
            return name
    return "?"  # pragma: no cover - only called once the row is known to hold one


def _has_unstorable(value: Any) -> bool:
    if isinstance(value, str):
        return unstorable(value)
    if isinstance(value, dict):
        return any(_has_unstorable(k) or _has_unstorable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_unstorable(v) for v in value)
    return False
