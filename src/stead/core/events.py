"""The events of a run's log: typed, frozen, versioned, named in the past tense.

Each event is a frozen dataclass with a ``kind`` tag. ``encode`` turns one into
``(kind, version, json_dict)`` for the store; ``decode`` is its inverse and refuses anything
it does not recognise (unknown kind, newer version, missing or mistyped field) with
``ValueError`` so the store can report the exact corrupt row.

The writer applies the reader's rules: ``problem`` checks a live event with the same field
rules ``decode`` applies to a row (compiled per class, like the encoders), and the store
refuses what it finds before the commit, so whatever a store accepted reads back equal.
Text from outside (a model's reply, a tool's result, an error message) is made storable
where it enters instead: see ``stead.core.messages.repair_text``.

Versioning: ``VERSION[kind]`` is the schema version written today. A decoder for an older
version upgrades it in ``_UPGRADES`` before building the dataclass; a newer version than this
code knows is refused rather than guessed at.
"""

from __future__ import annotations

import itertools
import math
import operator
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final, Literal, TypeAlias, get_type_hints

from stead.core.canonical import JSON
from stead.core.messages import (
    AssistantMessage,
    RedactedThinking,
    Thinking,
    ToolCall,
    Usage,
    message_from_json,
    message_to_json,
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


# -- the write-side check: what the store accepts, decode reads back ------------------------
#
# ``decode`` is the reader's rule book. The writer applies the same rules to the live event
# before it is encoded, so a row the store accepted always decodes again, to an equal event:
# the log cannot be poisoned by a value the reader refuses (a string where an integer
# belongs, a negative token count, a tuple that would come back as a list, NaN). Text UTF-8
# cannot hold is found on the encoded row, where one O(1) ``isascii`` covers every string.
# Each class's check is compiled once from its field table, like its encoder: it runs on
# every append.

_MAX_INT = 2**63
"""Integers are stored in 64 bits (SQLite INTEGER, PostgreSQL BIGINT)."""
_MAX_COLUMN_INT = 2**31
"""``turn_index`` is also a column of its own, an INTEGER (32 bits) in PostgreSQL."""
_MAX_EXACT_FLOAT = 2**53
_MAX_DEPTH = 64
"""JSON nesting deeper than this is refused (the JSON reader recurses)."""
_COLUMNS: Final = {"tool_call_id", "run_id", "agent", "session_id", "correlation_id"}
"""Fields also stored in a text column of their own: PostgreSQL text cannot hold NUL."""

Problem: TypeAlias = "str | None"
"""What is wrong with a value, or None."""


def _json_problem(value: Any, depth: int = 0) -> str | None:
    t = type(value)
    if value is None or t is bool or isinstance(value, str):
        return None
    if t is int:
        return None if -_MAX_INT < value < _MAX_INT else f"integer {value} is out of range"
    if t is float:
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if isinstance(value, dict | list):
        if depth >= _MAX_DEPTH:
            return f"nested more than {_MAX_DEPTH} levels deep"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            if isinstance(value, dict) and not isinstance(k, str):
                return f"key {k!r} is not a string"
            p = _json_problem(v, depth + 1)
            if p is not None:
                return f"[{k!r}]: {p}"
        return None
    if isinstance(value, tuple):
        return "a tuple would read back as a list; pass a list"
    return f"{t.__name__} is not a JSON value"


def _str_problem(value: Any) -> Problem:
    return None if isinstance(value, str) else f"expected a string, got {value!r:.80}"


def _int_problem(value: Any) -> Problem:
    if not isinstance(value, int) or isinstance(value, bool):
        return f"expected an integer, got {value!r:.80}"
    return None if -_MAX_INT < value < _MAX_INT else f"integer {value} is out of range"


def _float_problem(value: Any) -> Problem:
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    if isinstance(value, int) and not isinstance(value, bool):
        ok = -_MAX_EXACT_FLOAT <= value <= _MAX_EXACT_FLOAT
        return None if ok else f"{value} is not exactly a number (double)"
    return f"expected a number, got {value!r:.80}"


def _usage_problem(value: Any) -> Problem:
    if not isinstance(value, Usage):
        return f"expected a Usage, got {value!r:.80}"
    for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens"):
        v = getattr(value, key)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < _MAX_INT:
            return f"usage {key} must be a non-negative integer, got {v!r:.80}"
    v = value.cache_read_input_tokens
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < _MAX_INT:
        return f"usage cache_read_input_tokens must be a non-negative integer, got {v!r:.80}"
    return None


def _message_problem(m: Any) -> Problem:
    if not isinstance(m, AssistantMessage):
        return f"expected an AssistantMessage, got {m!r:.80}"
    if m.role != "assistant":
        return f"role must be 'assistant', got {m.role!r:.80}"
    for name in ("text", "stop_reason"):
        if not isinstance(getattr(m, name), str):
            return f"{name}: expected a string, got {getattr(m, name)!r:.80}"
    if type(m.tool_calls) is not tuple:
        return "tool_calls: expected a tuple of ToolCall"
    for i, c in enumerate(m.tool_calls):
        if not isinstance(c, ToolCall):
            return f"tool_calls[{i}]: expected a ToolCall, got {c!r:.80}"
        for name in ("id", "name", "arguments"):
            if not isinstance(getattr(c, name), str):
                return f"tool_calls[{i}].{name}: expected a string"
    if type(m.thinking) is not tuple:
        return "thinking: expected a tuple of thinking blocks"
    for i, b in enumerate(m.thinking):
        if isinstance(b, Thinking):
            ok = b.kind == "thinking" and isinstance(b.text, str) and isinstance(b.signature, str)
        elif isinstance(b, RedactedThinking):
            ok = b.kind == "redacted_thinking" and isinstance(b.data, str)
        else:
            ok = False
        if not ok:
            return f"thinking[{i}]: not a valid thinking block ({b!r:.80})"
    return None


def _problem_of(hint: Any, name: str) -> Callable[[Any], Problem]:
    """The check of one field type (mirrors ``_check``, which reads it back)."""
    if hint is AssistantMessage:
        return _message_problem
    if hint is Usage:
        return _usage_problem
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        arms = [_problem_of(a, name) for a in typing.get_args(hint)]
        optional = [_problem_of(a, name) for a in typing.get_args(hint) if a is not type(None)]

        def union(v: Any) -> Problem:
            problems = [arm(v) for arm in arms]
            if None in problems:
                return None
            if len(optional) == 1:  # X | None: say what is wrong with it as an X
                return optional[0](v)
            return f"{v!r:.80} matches none of {hint}"

        return union
    if origin is Literal:
        allowed = typing.get_args(hint)

        def literal(v: Any) -> Problem:
            ok = isinstance(v, str) and v in allowed
            return None if ok else f"{v!r:.80} is not one of {allowed}"

        return literal
    if hint is type(None):
        return lambda v: None if v is None else f"expected None, got {v!r:.80}"
    if origin is dict or hint is dict:
        return lambda v: (
            _json_problem(v) if isinstance(v, dict) else f"expected a dict, got {v!r:.80}"
        )
    if hint is bool:
        return lambda v: None if isinstance(v, bool) else f"expected a bool, got {v!r:.80}"
    if hint is float:
        return _float_problem
    if hint is int:
        if name == "turn_index":
            return lambda v: (
                _int_problem(v)
                or (
                    None
                    if 0 <= v < _MAX_COLUMN_INT
                    else f"turn index {v} is outside 0..{_MAX_COLUMN_INT - 1}"
                )
            )
        return _int_problem
    if hint is str:
        if name in _COLUMNS:
            return lambda v: (
                _str_problem(v)
                or ("a NUL character cannot be stored here" if "\x00" in v else None)
            )
        return _str_problem
    raise TypeError(f"no write check for field {name!r} of type {hint}")  # pragma: no cover


def _message_ok(m: Any) -> bool:
    """The fast form of ``_message_problem`` (no message built): one reply a model turn."""
    if not (
        isinstance(m, AssistantMessage)
        and m.role == "assistant"
        and isinstance(m.text, str)
        and isinstance(m.stop_reason, str)
        and type(m.tool_calls) is tuple
        and type(m.thinking) is tuple
    ):
        return False
    for c in m.tool_calls:
        if not (
            isinstance(c, ToolCall)
            and isinstance(c.id, str)
            and isinstance(c.name, str)
            and isinstance(c.arguments, str)
        ):
            return False
    return not m.thinking or _message_problem(m) is None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -_MAX_INT < v < _MAX_INT


def _is_turn(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _MAX_COLUMN_INT


def _is_column_str(v: Any) -> bool:
    return isinstance(v, str) and "\x00" not in v


def _is_json_object(v: Any) -> bool:
    return isinstance(v, dict) and _json_problem(v) is None


def _is_number(v: Any) -> bool:
    return _float_problem(v) is None


_SIMPLE: Final[dict[Any, type[Any]]] = {str: str, bool: bool, type(None): type(None)}
"""Hints whose check is a plain ``isinstance`` (no range, no NUL, no nested values)."""


def _ok_of(hint: Any, name: str) -> Callable[[Any], bool]:
    """A predicate true when ``_problem_of(hint, name)`` finds nothing, building no message:
    the fast path every append takes. Plain type tests are C-level ``isinstance`` calls."""
    if hint is AssistantMessage:
        return _message_ok
    if hint is Usage:
        return Usage.__instancecheck__  # see Usage
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        arms = typing.get_args(hint)
        if all(a in _SIMPLE and not (a is str and name in _COLUMNS) for a in arms):
            simple = tuple(_SIMPLE[a] for a in arms)
            return lambda v: isinstance(v, simple)
        first, *rest = (_ok_of(a, name) for a in arms)
        if len(rest) == 1:
            second = rest[0]
            return lambda v: first(v) or second(v)
        preds = (first, *rest)
        return lambda v: any(p(v) for p in preds)
    if origin is Literal:
        allowed = typing.get_args(hint)
        return lambda v: isinstance(v, str) and v in allowed
    if origin is dict or hint is dict:
        return _is_json_object
    if hint is float:
        return _is_number
    if hint is int:
        return _is_turn if name == "turn_index" else _is_int
    if hint is str and name in _COLUMNS:
        return _is_column_str
    if hint in _SIMPLE:
        return _SIMPLE[hint].__instancecheck__
    raise TypeError(f"no write check for field {name!r} of type {hint}")  # pragma: no cover


def _exact_types(hint: Any) -> frozenset[type[Any]]:
    """The exact types a well-typed value of ``hint`` has (a subclass takes the slow path)."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return frozenset().union(*(_exact_types(a) for a in typing.get_args(hint)))
    if origin is Literal:
        return frozenset({str})
    if origin is dict:
        return frozenset({dict})
    if hint is float:
        return frozenset({float, int})
    return frozenset({hint})


def _implied_by_type(hint: Any, name: str) -> bool:
    """Whether a value of one of ``_exact_types(hint)`` passes ``_ok_of(hint, name)`` on its
    type alone (no range, no membership, no nested values, no NUL to look for)."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return all(_implied_by_type(a, name) for a in typing.get_args(hint))
    if hint is str:
        return name not in _COLUMNS
    return hint in (bool, type(None), Usage)  # a Usage's constructor checks its counts


def _compile_check(kind: str) -> Callable[[Any], tuple[str, str] | None]:
    """The write check of one event class, compiled once from its field table.

    The fast path reads every field with one ``attrgetter``, looks the tuple of their exact
    types up in the set of well-typed signatures (a C-level map and one hash lookup), and
    calls a predicate only for the fields whose type does not settle it (a range, a
    literal, a nested value). Anything else takes the full predicates (a str subclass is
    fine, just slower), and a refusal is explained field by field.
    """
    table = _FIELDS[kind]
    names = [name for name, _, _, _ in table]
    preds = [_ok_of(hint, name) for name, hint, _, _ in table]
    explain = [(name, _problem_of(hint, name)) for name, hint, _, _ in table]
    getter = typing.cast(Callable[[Any], tuple[Any, ...]], operator.attrgetter(*names, "kind"))
    signatures = frozenset(
        (*sig, str) for sig in itertools.product(*(_exact_types(h) for _, h, _, _ in table))
    )
    checked = [
        (i, preds[i])
        for i, (name, hint, _, _) in enumerate(table)
        if not _implied_by_type(hint, name)
    ]
    call = operator.call

    def check(e: Any) -> tuple[str, str] | None:
        values = getter(e)
        if tuple(map(type, values)) in signatures:
            for i, pred in checked:
                if not pred(values[i]):
                    break
            else:
                return None
        elif all(map(call, preds, values)):  # map stops at preds: the trailing kind is dropped
            return None
        for name, f in explain:
            p = f(getattr(e, name))
            if p is not None:
                return name, p
        return "?", "refused"  # pragma: no cover - the predicates and explain agree

    return check


_CHECKS: Final = {cls: _compile_check(k) for k, cls in EVENT_TYPES.items()}


def problem(event: Any) -> tuple[str, str] | None:
    """``(field, what is wrong)`` when ``decode`` would not read ``event`` back equal after
    ``encode``, else None. Text UTF-8 cannot hold is checked on the encoded row instead
    (``unstorable_field``): one O(1) test there covers every string."""
    check = _CHECKS.get(type(event))
    if check is None:
        return "kind", f"{type(event).__name__} is not an event class"
    return check(event)


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
