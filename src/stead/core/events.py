"""The events of a run's log: typed, frozen, versioned, named in the past tense.

Each event is a frozen dataclass with a ``kind`` tag. ``encode`` turns one into
``(kind, version, json_dict)`` for the store; ``decode`` is its inverse and refuses anything
it does not recognise (unknown kind, newer version, missing or mistyped field) with
``ValueError`` so the store can report the exact corrupt row.

Versioning: ``VERSION[kind]`` is the schema version written today. A decoder for an older
version upgrades it in ``_UPGRADES`` before building the dataclass; a newer version than this
code knows is refused rather than guessed at.
"""

from __future__ import annotations

import operator
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final, Literal, TypeAlias, get_type_hints

from stead.core.canonical import JSON
from stead.core.messages import AssistantMessage, Usage, message_from_json, message_to_json

EffectClass = Literal["read_only", "idempotent_write", "non_idempotent"]
EFFECT_CLASSES: Final = ("read_only", "idempotent_write", "non_idempotent")

ResultSource = Literal[
    "executed", "reconciled", "rejected", "approval", "cancelled", "limit", "loop"
]
"""Where a tool result came from: the handler ran, the reconcile function found it, the call
was refused before running, a person decided, or the run was cancelled or bounded."""

Decision = Literal["approve", "deny", "happened", "not_happened", "skip"]


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
    phase: str
    """model | tool | runtime."""
    message: str = ""
    """Detail for a person."""
    last_seq: int = 0
    """The last checkpoint (event sequence) before the failure."""
    details: dict[str, Any] | None = None
    """Structured figures (e.g. a budget breach: spent, next-turn estimate, budget)."""


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
)

EVENT_TYPES: Final[dict[str, type[Any]]] = {t.kind: t for t in typing.get_args(Event)}
VERSION: Final[dict[str, int]] = {k: 1 for k in EVENT_TYPES}

_UPGRADES: Final[dict[tuple[str, int], Any]] = {}
"""(kind, old_version) -> function(dict) -> dict of the next version. Empty at v1."""


def _field_codecs(cls: type[Any]) -> list[tuple[str, Any, bool, Any]]:
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):
        required = f.default is f.default_factory  # both MISSING when no default
        out.append((f.name, hints[f.name], required, f.default))
    return out


_FIELDS: Final = {k: _field_codecs(t) for k, t in EVENT_TYPES.items()}


def _enc(value: Any) -> JSON:
    if isinstance(value, AssistantMessage):
        return message_to_json(value)
    if isinstance(value, Usage):
        return value.to_json()
    return value


def _compile_encoder(kind: str) -> Callable[[Any], dict[str, JSON]]:
    """Build the data encoder of one event class from its field table, once.

    Every append encodes every event, so this runs on each durable step: the required
    fields are read by one ``attrgetter`` (C), the optional ones are compared with their
    defaults, and only fields whose type can hold a message or a usage go through ``_enc``.
    Fields still at their default are left out: a log holds many events, and the decoder
    restores defaults, so this is lossless.
    """
    names: list[str] = []
    optional: list[tuple[str, Any]] = []
    convert: list[str] = []
    for name, hint, is_required, default in _FIELDS[kind]:
        if any(t in (AssistantMessage, Usage) for t in (hint, *typing.get_args(hint))):
            convert.append(name)
        if is_required:
            names.append(name)
        else:
            optional.append((name, default))
    # attrgetter of two or more names returns a tuple (of one, the bare value): the extra
    # trailing "kind" keeps it a tuple, and zip() below stops before it.
    getter = typing.cast(Callable[[Any], tuple[Any, ...]], operator.attrgetter(*names, "kind"))

    def encode(e: Any) -> dict[str, JSON]:
        d = dict(zip(names, getter(e)))  # noqa: B905 - the trailing kind is dropped
        for name, default in optional:
            v = getattr(e, name)
            if v != default:
                d[name] = v
        for name in convert:
            if name in d:
                d[name] = _enc(d[name])
        return d

    return encode


_ENCODERS: Final = {k: (VERSION[k], _compile_encoder(k)) for k in EVENT_TYPES}


def encode(event: Event) -> tuple[str, int, dict[str, JSON]]:
    """Return ``(kind, version, data)`` where data is plain JSON."""
    version, enc = _ENCODERS[event.kind]
    return event.kind, version, enc(event)


def _check(name: str, hint: Any, value: Any) -> Any:
    if hint is AssistantMessage:
        if not isinstance(value, dict):
            raise ValueError(f"field {name!r}: expected an object")
        try:
            msg = message_from_json(value)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"field {name!r}: not a valid message ({exc!r})") from exc
        if not isinstance(msg, AssistantMessage):
            raise ValueError(f"field {name!r}: expected an assistant message")
        return msg
    if hint is Usage:
        if not isinstance(value, dict):
            raise ValueError(f"field {name!r}: expected an object")
        try:
            return Usage.from_json(value)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"field {name!r}: not a valid usage ({exc!r})") from exc
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        for arm in typing.get_args(hint):
            try:
                return _check(name, arm, value)
            except ValueError:
                continue
        raise ValueError(f"field {name!r}: {value!r} matches none of {hint}")
    if origin is Literal:
        if value not in typing.get_args(hint):
            raise ValueError(f"field {name!r}: {value!r} not one of {typing.get_args(hint)}")
        return value
    if hint is type(None):
        if value is not None:
            raise ValueError(f"field {name!r}: expected null")
        return None
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise ValueError(f"field {name!r}: expected an object")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ValueError(f"field {name!r}: expected a boolean")
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(f"field {name!r}: expected a number")
        return float(value)
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"field {name!r}: expected an integer")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ValueError(f"field {name!r}: expected a string")
        return value
    raise ValueError(f"field {name!r}: unsupported type {hint}")  # pragma: no cover


def decode(kind: str, version: int, data: Any) -> Event:
    """Rebuild an event; ``ValueError`` says exactly what is wrong with the row."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    if not isinstance(data, dict):
        raise ValueError("event data is not a JSON object")
    current = VERSION[kind]
    if version > current:
        raise ValueError(f"{kind} v{version} is newer than this stead understands (v{current})")
    while version < current:
        upgrade = _UPGRADES.get((kind, version))
        if upgrade is None:
            raise ValueError(f"no upgrade from {kind} v{version}")
        data, version = upgrade(data), version + 1
    kwargs = {}
    for name, hint, required, _ in _FIELDS[kind]:
        if name not in data:
            if required:
                raise ValueError(f"{kind}: missing field {name!r}")
            continue
        kwargs[name] = _check(name, hint, data[name])
    unknown = set(data) - {f[0] for f in _FIELDS[kind]}
    if unknown:
        raise ValueError(f"{kind}: unknown fields {sorted(unknown)}")
    return typing.cast(Event, cls(**kwargs))
