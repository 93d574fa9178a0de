"""Effects as data: the assignment that describes one effect, and how it settled.

An ``Assignment`` is immutable and process-independent: everything an executor in another
process (or on another machine) needs to perform the effect, keyed by (session, run, effect
id). On the wire it is JSON with ``kind`` = ``model`` | ``tool`` and exactly the matching body;
``assignment_from_json`` refuses a mismatch rather than guessing. Its parts are records of the
one codec (``stead.core.codec``), as events and messages are.

An ``Outcome`` is how the effect settled. ``tool_unknown`` means it may or may not have
happened and is never re-run automatically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, assert_never

from stead.core.canonical import JSON
from stead.core.codec import Record
from stead.core.codegen import fast_init
from stead.core.events import EffectClass
from stead.core.failures import MODEL_FAILURE_CODES, is_retryable
from stead.core.messages import Usage
from stead.core.tagged import TaggedRecord, tagged

ReplayPolicy = Literal["rerun", "rerun_with_key", "reconcile_or_ask"]
"""How a call in flight at a crash is recovered; follows from the effect class."""

REPLAY_POLICY: dict[EffectClass, ReplayPolicy] = {
    "read_only": "rerun",
    "idempotent_write": "rerun_with_key",
    "non_idempotent": "reconcile_or_ask",
}


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentKey:
    """Identity of one effect across processes."""

    session_id: str
    run_id: str
    effect_id: str
    """Deterministic digest of (run, step, call, attempt)."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelBody:
    """A model call."""

    model: str
    request: dict[str, Any]
    """The provider-neutral request (system, messages, tools); empty (and the digest "") for
    an executor that performs the live request it is handed (``InProcessExecutor``)."""
    request_digest: str
    """sha256 of the canonical request."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolBody:
    """A tool call."""

    tool_name: str
    """Registered tool name."""
    definition_digest: str
    """Digest of the tool's schema, so an executor can refuse a changed definition."""
    arguments: str
    """Canonical JSON arguments."""
    effect_class: EffectClass
    replay_policy: ReplayPolicy
    """Recovery policy for this call."""
    tool_call_id: str
    """The model's call id."""
    turn_index: int
    idempotency_key: str
    """sha256(run_id + tool_call_id)."""
    attempt: int


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """One effect to perform: a key and exactly one body of the matching kind."""

    key: AssignmentKey
    """Identity."""
    body: ModelBody | ToolBody
    """What to do."""

    @property
    def kind(self) -> Literal["model", "tool"]:
        """``model`` or ``tool``, from the body."""
        return "model" if isinstance(self.body, ModelBody) else "tool"


def _policy_follows(body: ToolBody) -> str | None:
    if body.replay_policy != REPLAY_POLICY.get(body.effect_class):
        return "replay policy does not match the effect class"
    return None


_KEY: Final = Record(AssignmentKey, label="assignment key")
_BODIES: Final = {
    "model": Record(ModelBody, label="model body"),
    "tool": Record(ToolBody, label="tool body", check=_policy_follows),
}
"""The one codec's records of an assignment's parts. On the wire the body sits under the key
its kind names (``{"kind": "tool", "key": {...}, "tool": {...}}``)."""


def assignment_to_json(a: Assignment) -> dict[str, JSON]:
    """Encode for the wire."""
    kind = a.kind
    return {"kind": kind, "key": _KEY.enc(a.key), kind: _BODIES[kind].enc(a.body)}  # type: ignore[misc]


def assignment_from_json(data: dict[str, Any]) -> Assignment:
    """Decode; ``ValueError`` when ``kind`` and body disagree or a field is wrong."""
    if not isinstance(data, dict):
        raise ValueError("an assignment is a JSON object")
    kind = data.get("kind")
    bodies = {k for k in _BODIES if k in data}
    if kind not in _BODIES or bodies != {kind}:
        raise ValueError(f"assignment kind {kind!r} does not match its body {sorted(bodies)}")
    unknown = set(data) - {"kind", "key", kind}
    if unknown:
        raise ValueError(f"assignment: unknown fields {sorted(map(str, unknown))}")
    if "key" not in data:
        raise ValueError("assignment: missing field 'key'")
    return Assignment(key=_KEY.dec(data["key"]), body=_BODIES[kind].dec(data[kind]))


# -- outcomes --------------------------------------------------------------------------------


@tagged("model_succeeded")
class ModelSucceeded(TaggedRecord):
    """The model replied."""

    response: Any
    """The provider-neutral response (a ModelResponse)."""


@tagged("model_failed")
class ModelFailed(TaggedRecord):
    """The model call failed with a stable code."""

    code: str
    """One of the model failure codes."""
    message: str = ""
    """Detail."""
    retry_after: float | None = None
    """Seconds the provider asked us to wait, if any."""
    usage: Usage | None = None
    """What the failed attempt consumed before it failed, if the provider said."""

    def __post_init__(self) -> None:
        if self.code not in MODEL_FAILURE_CODES:
            raise ValueError(f"unknown model failure code {self.code!r}")

    @property
    def retryable(self) -> bool:
        """Derived from the code, never stored."""
        return is_retryable(self.code)


@tagged("tool_succeeded")
class ToolSucceeded(TaggedRecord):
    """The handler returned."""

    content: str
    """Serialized result the model reads."""


@tagged("tool_failed")
class ToolFailed(TaggedRecord):
    """The handler raised or refused: a known failure, it did not (fully) happen."""

    failure: str
    """What went wrong, for the model."""
    retry: bool = False
    """Whether the tool says trying again could help (the model decides)."""


@tagged("tool_unknown")
class ToolUnknown(TaggedRecord):
    """It may or may not have happened. Never re-run automatically."""

    reason: str
    """Why it is unknown."""


@tagged("tool_deferred")
class ToolDeferred(TaggedRecord):
    """The handler stopped without acting and left the call to a person: it asked for
    consent first (``approval``), or for the call to be made elsewhere (``result``)."""

    ask: Literal["approval", "result"]
    reason: str = ""
    """What the tool said, if anything."""


@tagged("cancelled")
class Cancelled(TaggedRecord):
    """The effect was aborted before it settled."""

    reason: str = ""
    """Why."""


def tool_assignment(call: Any, key: AssignmentKey, digest: str, attempt: int) -> Assignment:
    """The assignment of ``attempt`` of a tool call (``call`` a ``CallState``)."""
    edited = call.edited_arguments  # call.effective_arguments(), without the call
    return Assignment(
        key=key,
        body=ToolBody(
            tool_name=call.name,
            definition_digest=digest,
            arguments=edited if edited is not None else call.arguments,
            effect_class=call.effect_class,
            replay_policy=REPLAY_POLICY[call.effect_class],
            tool_call_id=call.tool_call_id,
            turn_index=call.turn_index,
            idempotency_key=call.idempotency_key,
            attempt=attempt,
        ),
    )


Outcome: TypeAlias = (
    ModelSucceeded
    | ModelFailed
    | ToolSucceeded
    | ToolFailed
    | ToolUnknown
    | ToolDeferred
    | Cancelled
)


ToolOutcome: TypeAlias = ToolSucceeded | ToolFailed | ToolUnknown | ToolDeferred
"""What one attempt of a tool call came to."""


def tool_result_of(outcome: Outcome) -> tuple[str, bool] | None:
    """(content, is_error) to record for a tool outcome, or None when nothing may be recorded
    (unknown outcomes are settled by reconcile or a person, never by guessing)."""
    match outcome:
        case ToolSucceeded():
            return outcome.content, False
        case ToolFailed():
            return outcome.failure, True
        case Cancelled():
            return f"cancelled: {outcome.reason}", True
        case ToolUnknown():
            return None
        case ToolDeferred():
            # Where no run loop can wait on a person for it (``RunLoop`` does): the call
            # did not act, and the model reads that.
            what = "a person's approval" if outcome.ask == "approval" else "to be made elsewhere"
            return f"not run: the tool asked for {what} while running", True
        case ModelSucceeded() | ModelFailed():
            raise ValueError("a model outcome is not a tool result")
        case _:
            assert_never(outcome)
