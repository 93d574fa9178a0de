"""Fold a run's events into its current state.

``fold(events)`` is the only way state is made: the runtime, the CLI and the tests all
derive what a run is from its log, so they cannot disagree. ``apply`` validates every event
against the state machine and the run's structure (a result for a call nobody requested, a
second result, a turn that starts with calls still open) and raises without changing the
state, which is how a bad append is refused before it is written.

``RunState`` is a mutable accumulator for speed (folding 10,000 events must not copy the
conversation 10,000 times); treat a state you did not fold yourself as read-only and use
``copy()`` before applying to it.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias, TypeVar

from stead.core.canonical import sha256_hex
from stead.core.events import (
    EVENT_TYPES,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageRecorded,
    Decision,
    EffectClass,
    Event,
    LoopDetected,
    ModelCallFailed,
    NoticeInjected,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunRecovered,
    RunRequeued,
    RunStarted,
    RunTimedOut,
    StepFailed,
    ToolCallRequested,
    ToolCallStarted,
    ToolOutcomeUnknown,
    ToolReconciled,
    ToolResultRecorded,
    TurnResumed,
    TurnStarted,
    decode,
    encode,
)
from stead.core.messages import (
    AssistantMessage,
    Message,
    NoticeMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
    message_from_json,
    message_to_json,
)
from stead.core.states import BIRTH, FINISHED, TABLE, RunStatus
from stead.errors import Conflict, IllegalTransition

STATE_VERSION: Final = 3
"""Bumped whenever RunState's snapshot shape changes; older snapshots are ignored and the
log is folded from the start instead."""


@dataclass(slots=True, kw_only=True)
class CallState:
    """Everything known about one tool call of the current turn."""

    turn_index: int
    """Its turn."""
    tool_call_id: str
    """The model's id."""
    name: str
    """Tool name."""
    arguments: str
    """Canonical JSON of the arguments (or raw text when rejected)."""
    effect_class: EffectClass | None
    """Side-effect class; None for unknown tools."""
    idempotency_key: str
    """sha256(run_id + tool_call_id); call ids are unique in a run, so keys are too."""
    rejection: str | None = None
    """Why it may not run, if so."""
    requires_approval: bool = False
    """A person must consent before it runs."""
    attempts: int = 0
    """How many times a handler was recorded as started."""
    result: ToolResultRecorded | None = None
    """Its one result, once recorded."""
    unknown: bool = False
    """Its outcome was declared unknown after a crash."""
    verdict: str | None = None
    """Latest reconcile verdict since the last start."""
    decision: Decision | None = None
    """Latest human decision since the last start."""
    edited_arguments: str | None = None
    """Arguments a person approved instead of the model's."""

    @property
    def pending(self) -> bool:
        """No result yet."""
        return self.result is None

    @property
    def in_flight(self) -> bool:
        """Started at least once and never settled: it may or may not have happened."""
        return self.result is None and self.attempts > 0

    def effective_arguments(self) -> str:
        """The arguments a run of this call uses: edited by a person, or the model's."""
        return self.edited_arguments if self.edited_arguments is not None else self.arguments


@dataclass(slots=True, kw_only=True)
class _Conversation:
    """``RunState.conversation`` as placed so far: a cache, never compared or saved."""

    source: list[Message]
    """The message list it was built from (a cache of another list is stale)."""
    consumed: int = 0
    """How many of its messages are placed."""
    out: list[Message] = field(default_factory=list)
    """The conversation so far."""
    order: dict[str, int] = field(default_factory=dict)
    """Call order of the last reply, for its results."""
    start: int = 0
    """Where the last block of results begins in ``out``."""


@dataclass(slots=True, kw_only=True)
class RunState:
    """The folded state of one run."""

    run_id: str = ""
    """Run id."""
    agent: str = ""
    """Agent name."""
    input: str = ""
    """First user input."""
    session_id: str = ""
    """Session grouping."""
    correlation_id: str = ""
    """Caller's correlation id."""
    config: dict[str, Any] = field(default_factory=dict)
    """Per-run settings."""
    status: RunStatus | None = None
    """None until run_created is applied."""
    seq: int = 0
    """Sequence number of the last applied event."""
    messages: list[Message] = field(default_factory=list)
    """The conversation in the order events recorded it."""
    turn_index: int = -1
    """Current turn (-1 before the first)."""
    turn_has_reply: bool = False
    """The current turn's assistant message is recorded."""
    calls: dict[str, CallState] = field(default_factory=dict)
    """Tool calls of the current turn, in the model's order."""
    model_failures: int = 0
    """Failed model attempts in the current turn."""
    approvals: dict[str, ApprovalRequested] = field(default_factory=dict)
    """Pending approvals by tool call id."""
    usage: Usage = field(default_factory=Usage)
    """Aggregated usage of the whole run."""
    tool_calls_total: int = 0
    """Tool calls requested over the whole run."""
    output: str | None = None
    """Final answer once completed."""
    stop_reason: str | None = None
    """Why it completed."""
    error: dict[str, Any] | None = None
    """code/phase/message of the last failure, cancellation or timeout."""
    owner: str = ""
    """Last recorded owner."""
    epoch: int = 0
    """Last recorded owner's epoch."""
    cancel_requested: str | None = None
    """The reason of a pending cancel request, until the run is cancelled."""
    recent_calls: list[str] = field(default_factory=list)
    """Digests of the latest tool calls (name + canonical arguments), newest last, for
    repetition detection."""
    call_ids: set[str] = field(default_factory=set)
    """Every tool call id of every recorded reply: a new reply's ids are made unique against
    these (``stead.core.builders.unique_call_ids``). Not in a snapshot: rebuilt from its
    messages."""
    step_failures: int = 0
    """How many times in a row a step failed (``step_failed``) with no progress between
    (so the same step); any other event but ``run_recovered`` (a new claimant) resets it."""
    last_step_failure: StepFailed | None = None
    """The latest of those failures: its step and error."""
    _conversation: _Conversation | None = field(default=None, init=False, repr=False, compare=False)
    """Cache of ``conversation()``."""

    def copy(self) -> RunState:
        """A deep copy safe to apply events to."""
        return _copy.deepcopy(self)

    def pending_calls(self) -> list[CallState]:
        """Calls of the current turn that have no result, in the model's order."""
        return [c for c in self.calls.values() if c.result is None]

    def unrequested_calls(self) -> list[str]:
        """Ids of the current reply's tool calls with no ``tool_call_requested`` yet.

        They are open too: a history may not move past a call that has no result."""
        reply = self.last_assistant()
        if reply is None:
            return []
        return [c.id for c in reply.tool_calls if c.id not in self.calls]

    def last_assistant(self) -> AssistantMessage | None:
        """The current turn's assistant message, if recorded."""
        if not self.turn_has_reply:
            return None
        for m in reversed(self.messages):
            if isinstance(m, AssistantMessage):
                return m
        return None  # pragma: no cover - turn_has_reply implies one exists

    def conversation(self) -> list[Message]:
        """Messages as a model must see them: each turn's results in the order of its calls.

        Results are recorded in the order tools finish, which varies; the request sent to a
        model must not, so its digest is stable across a crash and a resume.
        """
        # Messages are only ever appended, so the work done for the last request is kept
        # and only the new messages are placed (a run asks once per turn: this keeps a long
        # run linear instead of quadratic). Anything else (a new list) starts over.
        c = self._conversation
        if c is None or c.source is not self.messages or c.consumed > len(self.messages):
            c = self._conversation = _Conversation(source=self.messages)
        out, order, start = c.out, c.order, c.start
        for m in self.messages[c.consumed :]:
            if isinstance(m, ToolResultMessage):
                out.append(m)
                continue
            if len(out) - start > 1:  # only a block of two or more can be out of order
                out[start:] = sorted(out[start:], key=lambda r: _rank(order, r))
            if isinstance(m, AssistantMessage):
                order = {c.id: i for i, c in enumerate(m.tool_calls)} if m.tool_calls else {}
            out.append(m)
            start = len(out)
        c.consumed, c.order, c.start = len(self.messages), order, start
        if len(out) - start > 1:
            out[start:] = sorted(out[start:], key=lambda r: _rank(order, r))
        return list(out)

    # -- snapshots -------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The whole state as JSON, for a snapshot row."""
        return {
            "v": STATE_VERSION,
            "run_id": self.run_id,
            "agent": self.agent,
            "input": self.input,
            "session_id": self.session_id,
            "correlation_id": self.correlation_id,
            "config": self.config,
            "status": self.status.value if self.status else None,
            "seq": self.seq,
            "messages": [message_to_json(m) for m in self.messages],
            "turn_index": self.turn_index,
            "turn_has_reply": self.turn_has_reply,
            "calls": [_call_to_json(c) for c in self.calls.values()],
            "model_failures": self.model_failures,
            "approvals": [encode(a)[2] for a in self.approvals.values()],
            "usage": self.usage.to_json(),
            "tool_calls_total": self.tool_calls_total,
            "output": self.output,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "owner": self.owner,
            "epoch": self.epoch,
            "cancel_requested": self.cancel_requested,
            "recent_calls": self.recent_calls,
            "step_failures": self.step_failures,
            "last_step_failure": (
                encode(self.last_step_failure)[2] if self.last_step_failure else None
            ),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        """Rebuild a snapshot; ``ValueError`` if it is from another state version."""
        if data.get("v") != STATE_VERSION:
            raise ValueError(f"snapshot version {data.get('v')} != {STATE_VERSION}")
        calls = [_call_from_json(c) for c in data["calls"]]
        approvals = [decode("approval_requested", 1, a) for a in data["approvals"]]
        messages = [message_from_json(m) for m in data["messages"]]
        failure = data["last_step_failure"]
        last_failure = decode("step_failed", 1, failure) if failure is not None else None
        return cls(
            run_id=data["run_id"],
            agent=data["agent"],
            input=data["input"],
            session_id=data["session_id"],
            correlation_id=data["correlation_id"],
            config=data["config"],
            status=RunStatus(data["status"]) if data["status"] else None,
            seq=data["seq"],
            messages=messages,
            turn_index=data["turn_index"],
            turn_has_reply=data["turn_has_reply"],
            calls={c.tool_call_id: c for c in calls},
            model_failures=data["model_failures"],
            approvals={a.tool_call_id: a for a in approvals if isinstance(a, ApprovalRequested)},
            usage=Usage.from_json(data["usage"]),
            tool_calls_total=data["tool_calls_total"],
            output=data["output"],
            stop_reason=data["stop_reason"],
            error=data["error"],
            owner=data["owner"],
            epoch=data["epoch"],
            cancel_requested=data["cancel_requested"],
            recent_calls=list(data["recent_calls"]),
            call_ids={
                c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls
            },
            step_failures=data["step_failures"],
            last_step_failure=last_failure if isinstance(last_failure, StepFailed) else None,
        )


def _call_to_json(c: CallState) -> dict[str, Any]:
    return {
        "turn_index": c.turn_index,
        "tool_call_id": c.tool_call_id,
        "name": c.name,
        "arguments": c.arguments,
        "effect_class": c.effect_class,
        "idempotency_key": c.idempotency_key,
        "rejection": c.rejection,
        "requires_approval": c.requires_approval,
        "attempts": c.attempts,
        "result": encode(c.result)[2] if c.result else None,
        "unknown": c.unknown,
        "verdict": c.verdict,
        "decision": c.decision,
        "edited_arguments": c.edited_arguments,
    }


def _call_from_json(d: dict[str, Any]) -> CallState:
    result = decode("tool_result_recorded", 1, d["result"]) if d["result"] else None
    return CallState(
        turn_index=d["turn_index"],
        tool_call_id=d["tool_call_id"],
        name=d["name"],
        arguments=d["arguments"],
        effect_class=d["effect_class"],
        idempotency_key=d["idempotency_key"],
        rejection=d["rejection"],
        requires_approval=d["requires_approval"],
        attempts=d["attempts"],
        result=result if isinstance(result, ToolResultRecorded) else None,
        unknown=d["unknown"],
        verdict=d["verdict"],
        decision=d["decision"],
        edited_arguments=d["edited_arguments"],
    )


# -- applying events ---------------------------------------------------------------------
#
# One handler per event kind, in two halves registered next to each other: ``check`` raises
# to refuse the event (before anything changes) or returns the status it moves the run to
# (None: it stays); ``record`` changes the state and never raises. ``apply`` is the one
# choke point between them: it looks the move up in ``stead.core.states.TABLE``.

RECENT_CALLS: Final = 32
"""How many call digests the state keeps for repetition detection."""

E = TypeVar("E", bound=Event)
Check: TypeAlias = Callable[[RunState, Any], RunStatus | None]
Record: TypeAlias = Callable[[RunState, Any], None]
_CHECKS: dict[str, Check] = {}
_RECORDS: dict[str, Record] = {}


def check(
    cls: type[E],
) -> Callable[
    [Callable[[RunState, E], RunStatus | None]], Callable[[RunState, E], RunStatus | None]
]:
    """Register the check of ``cls``: refuse it by raising, or say where it moves the run."""

    def register(
        fn: Callable[[RunState, E], RunStatus | None],
    ) -> Callable[[RunState, E], RunStatus | None]:
        _CHECKS[cls.kind] = fn
        return fn

    return register


def record(
    cls: type[E],
) -> Callable[[Callable[[RunState, E], None]], Callable[[RunState, E], None]]:
    """Register what ``cls`` changes in the state, once its check passed."""

    def register(fn: Callable[[RunState, E], None]) -> Callable[[RunState, E], None]:
        _RECORDS[cls.kind] = fn
        return fn

    return register


def call_digest(name: str, arguments: str) -> str:
    """Identity of a call for repetition detection: tool name and canonical arguments."""
    return sha256_hex(name + "\x00" + arguments)[:16]


def _refuse(state: RunState, event: Event, detail: str) -> IllegalTransition:
    current = state.status.value if state.status else "nothing"
    return IllegalTransition(current, current, event.kind, detail)


def _rank(order: dict[str, int], message: Message) -> int:
    """Position of a result's call in its reply (unknown ids last, in arrival order)."""
    assert isinstance(message, ToolResultMessage)
    return order.get(message.tool_call_id, len(order))


def _call(state: RunState, event: Event, turn_index: int, call_id: str) -> CallState:
    if turn_index != state.turn_index:
        raise _refuse(state, event, f"turn {turn_index} is not the current turn {state.turn_index}")
    call = state.calls.get(call_id)
    if call is None:
        raise _refuse(state, event, f"tool call {call_id!r} was never requested")
    return call


def _open_calls(state: RunState) -> bool:
    """The current reply has a call with no result (requested or not)."""
    return bool(state.pending_calls() or state.unrequested_calls())


# -- the run's life


@check(RunCreated)
def _check_created(state: RunState, e: RunCreated) -> RunStatus:
    if state.status is not None:
        raise _refuse(state, e, "the run already exists")
    return RunStatus.QUEUED


@record(RunCreated)
def _record_created(state: RunState, e: RunCreated) -> None:
    state.run_id, state.agent, state.input = e.run_id, e.agent, e.input
    state.session_id, state.correlation_id = e.session_id, e.correlation_id
    state.config = dict(e.config or {})
    state.messages.append(UserMessage(content=e.input))


@check(RunStarted)
def _check_started(state: RunState, e: RunStarted) -> RunStatus:
    return RunStatus.RUNNING


@record(RunStarted)
def _record_started(state: RunState, e: RunStarted) -> None:
    state.owner, state.epoch = e.owner, e.epoch


@record(RunRecovered)
def _record_recovered(state: RunState, e: RunRecovered) -> None:
    state.owner, state.epoch = e.owner, e.epoch


@check(RunCompleted)
def _check_completed(state: RunState, e: RunCompleted) -> RunStatus:
    if _open_calls(state):
        raise _refuse(state, e, "calls without results remain")
    return RunStatus.COMPLETED


@record(RunCompleted)
def _record_completed(state: RunState, e: RunCompleted) -> None:
    state.output, state.stop_reason = e.output, e.stop_reason


@check(RunFailed)
def _check_failed(state: RunState, e: RunFailed) -> RunStatus:
    return RunStatus.FAILED


@record(RunFailed)
def _record_failed(state: RunState, e: RunFailed) -> None:
    state.cancel_requested = None
    state.error = {"code": e.code, "phase": e.phase, "message": e.message}


@check(RunCancelRequested)
def _check_cancel_requested(state: RunState, e: RunCancelRequested) -> None:
    if state.status in FINISHED:
        raise _refuse(state, e, f"a {state.status} run cannot be cancelled")


@record(RunCancelRequested)
def _record_cancel_requested(state: RunState, e: RunCancelRequested) -> None:
    state.cancel_requested = e.reason


@check(RunCancelled)
def _check_cancelled(state: RunState, e: RunCancelled) -> RunStatus:
    if _open_calls(state):
        raise _refuse(state, e, "every open call needs its cancelled result first")
    return RunStatus.CANCELLED


@record(RunCancelled)
def _record_cancelled(state: RunState, e: RunCancelled) -> None:
    state.approvals, state.cancel_requested = {}, None
    state.error = {"code": "cancelled", "phase": "run", "message": e.reason}


@check(RunTimedOut)
def _check_timed_out(state: RunState, e: RunTimedOut) -> RunStatus:
    return RunStatus.TIMED_OUT


@record(RunTimedOut)
def _record_timed_out(state: RunState, e: RunTimedOut) -> None:
    state.approvals, state.cancel_requested = {}, None
    state.error = {"code": "timed_out", "phase": "approval", "message": e.reason}


@check(RunRequeued)
def _check_requeued(state: RunState, e: RunRequeued) -> RunStatus:
    return RunStatus.QUEUED


@check(StepFailed)
def _check_step_failed(state: RunState, e: StepFailed) -> None:
    if state.status in FINISHED:
        raise _refuse(state, e, "a finished run has no step to fail")


@record(StepFailed)
def _record_step_failed(state: RunState, e: StepFailed) -> None:
    # No progress since the last failure means the same state, hence the same step
    # (next_step is a function of the log): consecutive failures are what counts.
    state.step_failures += 1
    state.last_step_failure = e


# -- turns and the model


@check(TurnStarted)
def _check_turn_started(state: RunState, e: TurnStarted) -> RunStatus:
    if state.status is RunStatus.QUEUED:
        raise _refuse(state, e, "a queued run must be started (run_started) first")
    if e.turn_index != state.turn_index + 1:
        raise _refuse(state, e, f"turn {e.turn_index} after turn {state.turn_index}")
    if state.turn_index >= 0 and not state.turn_has_reply:
        raise _refuse(state, e, "the previous turn has no assistant message")
    if _open_calls(state):
        raise _refuse(state, e, "the current turn still has calls without results")
    if state.approvals:
        raise _refuse(state, e, "approvals are still pending")
    return RunStatus.RUNNING


@record(TurnStarted)
def _record_turn_started(state: RunState, e: TurnStarted) -> None:
    state.turn_index, state.turn_has_reply = e.turn_index, False
    state.calls, state.model_failures = {}, 0


@check(TurnResumed)
def _check_turn_resumed(state: RunState, e: TurnResumed) -> RunStatus:
    if e.turn_index != state.turn_index or not state.pending_calls():
        raise _refuse(state, e, "no open turn with pending calls to resume")
    return RunStatus.AWAITING_TOOL


def _before_reply(state: RunState, turn_index: int) -> bool:
    return state.turn_index >= 0 and turn_index == state.turn_index and not state.turn_has_reply


@check(NoticeInjected)
def _check_notice(state: RunState, e: NoticeInjected) -> None:
    if not _before_reply(state, e.turn_index):
        raise _refuse(state, e, "a notice belongs to a turn before its reply")


@record(NoticeInjected)
def _record_notice(state: RunState, e: NoticeInjected) -> None:
    state.messages.append(NoticeMessage(content=e.content))


@check(ModelCallFailed)
def _check_model_failed(state: RunState, e: ModelCallFailed) -> None:
    if not _before_reply(state, e.turn_index):
        raise _refuse(state, e, "no model call in progress for that turn")


@record(ModelCallFailed)
def _record_model_failed(state: RunState, e: ModelCallFailed) -> None:
    state.model_failures += 1
    if e.usage is not None:
        state.usage = state.usage + e.usage


@check(AssistantMessageRecorded)
def _check_reply(state: RunState, e: AssistantMessageRecorded) -> None:
    if state.turn_index < 0:
        raise _refuse(state, e, "no turn has started")
    if e.turn_index != state.turn_index or state.turn_has_reply:
        raise _refuse(state, e, "this turn already has an assistant message")
    if state.status is not RunStatus.RUNNING:
        raise _refuse(state, e, "a model reply needs a running run")
    ids = [c.id for c in e.message.tool_calls]
    if len(set(ids)) != len(ids):
        raise _refuse(state, e, "duplicate tool call ids in one reply")


@record(AssistantMessageRecorded)
def _record_reply(state: RunState, e: AssistantMessageRecorded) -> None:
    state.turn_has_reply = True
    state.messages.append(e.message)
    state.usage = state.usage + e.usage
    state.call_ids.update(c.id for c in e.message.tool_calls)


# -- tool calls


@check(ToolCallRequested)
def _check_requested(state: RunState, e: ToolCallRequested) -> RunStatus | None:
    if e.turn_index != state.turn_index or not state.turn_has_reply:
        raise _refuse(state, e, "tool calls need this turn's assistant message first")
    reply = state.last_assistant()
    assert reply is not None
    if e.tool_call_id not in {c.id for c in reply.tool_calls}:
        raise _refuse(state, e, f"{e.tool_call_id!r} is not in the reply")
    if e.tool_call_id in state.calls:
        raise Conflict(f"tool call {e.tool_call_id!r} is already requested")
    # A call refused on arrival is never awaited: its error result follows in the same
    # commit, and the run stays where it is.
    return RunStatus.AWAITING_TOOL if e.rejection is None else None


@record(ToolCallRequested)
def _record_requested(state: RunState, e: ToolCallRequested) -> None:
    state.calls[e.tool_call_id] = CallState(
        turn_index=e.turn_index,
        tool_call_id=e.tool_call_id,
        name=e.name,
        arguments=e.arguments,
        effect_class=e.effect_class,
        idempotency_key=e.idempotency_key,
        rejection=e.rejection,
        requires_approval=e.requires_approval,
    )
    state.tool_calls_total += 1
    state.recent_calls.append(call_digest(e.name, e.arguments))
    del state.recent_calls[:-RECENT_CALLS]


@check(LoopDetected)
def _check_loop(state: RunState, e: LoopDetected) -> None:
    if _call(state, e, e.turn_index, e.tool_call_id).result is not None:
        raise _refuse(state, e, "a settled call cannot be intercepted")


@check(ToolCallStarted)
def _check_call_started(state: RunState, e: ToolCallStarted) -> None:
    call = _call(state, e, e.turn_index, e.tool_call_id)
    if call.result is not None or call.rejection is not None:
        raise _refuse(state, e, "the call is settled or refused; it cannot start")
    if e.tool_call_id in state.approvals:
        raise _refuse(state, e, "the call waits on an approval decision")
    if e.attempt != call.attempts + 1:
        raise _refuse(state, e, f"attempt {e.attempt} after {call.attempts}")


@record(ToolCallStarted)
def _record_call_started(state: RunState, e: ToolCallStarted) -> None:
    call = state.calls[e.tool_call_id]
    call.attempts, call.verdict, call.decision, call.unknown = e.attempt, None, None, False


@check(ToolResultRecorded)
def _check_result(state: RunState, e: ToolResultRecorded) -> None:
    if _call(state, e, e.turn_index, e.tool_call_id).result is not None:
        raise Conflict(
            f"a result for tool call {e.tool_call_id!r} in turn {e.turn_index} is already recorded"
        )
    if e.tool_call_id in state.approvals and e.source != "cancelled":
        raise _refuse(state, e, "the call waits on an approval decision")


@record(ToolResultRecorded)
def _record_result(state: RunState, e: ToolResultRecorded) -> None:
    state.approvals.pop(e.tool_call_id, None)
    state.calls[e.tool_call_id].result = e
    state.messages.append(
        ToolResultMessage(
            tool_call_id=e.tool_call_id, name=e.name, content=e.content, is_error=e.is_error
        )
    )


@check(ToolOutcomeUnknown)
def _check_unknown(state: RunState, e: ToolOutcomeUnknown) -> None:
    if not _call(state, e, e.turn_index, e.tool_call_id).in_flight:
        raise _refuse(state, e, "only a started, unsettled call can be unknown")


@record(ToolOutcomeUnknown)
def _record_unknown(state: RunState, e: ToolOutcomeUnknown) -> None:
    state.calls[e.tool_call_id].unknown = True


@check(ToolReconciled)
def _check_reconciled(state: RunState, e: ToolReconciled) -> None:
    if not _call(state, e, e.turn_index, e.tool_call_id).in_flight:
        raise _refuse(state, e, "only a started, unsettled call is reconciled")


@record(ToolReconciled)
def _record_reconciled(state: RunState, e: ToolReconciled) -> None:
    state.calls[e.tool_call_id].verdict = e.verdict


@check(ApprovalRequested)
def _check_approval_requested(state: RunState, e: ApprovalRequested) -> RunStatus:
    call = _call(state, e, e.turn_index, e.tool_call_id)
    if call.result is not None or e.tool_call_id in state.approvals:
        raise _refuse(state, e, "the call is settled or already waiting")
    return RunStatus.AWAITING_APPROVAL


@record(ApprovalRequested)
def _record_approval_requested(state: RunState, e: ApprovalRequested) -> None:
    state.approvals[e.tool_call_id] = e


@check(ApprovalDecided)
def _check_decided(state: RunState, e: ApprovalDecided) -> RunStatus | None:
    _call(state, e, e.turn_index, e.tool_call_id)
    if e.tool_call_id not in state.approvals:
        raise _refuse(state, e, "no approval is pending for that call")
    return RunStatus.AWAITING_TOOL if len(state.approvals) == 1 else None


@record(ApprovalDecided)
def _record_decided(state: RunState, e: ApprovalDecided) -> None:
    state.approvals = {k: v for k, v in state.approvals.items() if k != e.tool_call_id}
    call = state.calls[e.tool_call_id]
    call.decision = e.decision
    if e.arguments is not None:
        call.edited_arguments = e.arguments


def _stays(state: RunState, event: Event) -> None:
    """The check of an event with nothing to check: it is legal anywhere and stays."""


def _nothing(state: RunState, event: Event) -> None:
    """The record of an event that changes nothing but the sequence number."""


HANDLERS: Final[Mapping[str, tuple[Check, Record]]] = MappingProxyType(
    {
        kind: (_CHECKS.get(kind, _stays), _RECORDS.get(kind, _nothing))
        for kind in EVENT_TYPES
        if kind in _CHECKS or kind in _RECORDS
    }
)
"""event kind -> (check, record): how each event is applied. Every kind has one."""

_KEEPS_STEP_FAILURES: Final = frozenset({StepFailed.kind, RunRecovered.kind})
"""A failed step, and a new claimant, are not progress; anything else resets the count."""


def apply(state: RunState, event: Event, seq: int | None = None) -> None:
    """Apply one event in place, or raise (leaving ``state`` unchanged) if it is not legal.

    The event's check runs first and changes nothing; then its move, if it makes one, is
    looked up in ``TABLE`` here and only here; then its record changes the state.
    """
    kind = event.kind
    status = state.status
    if status is None and kind != BIRTH[0]:
        raise _refuse(state, event, "the first event of a run must be run_created")
    check_, record_ = HANDLERS[kind]
    target = check_(state, event)
    if target is not None:
        if (TABLE[status].get(kind) if status is not None else BIRTH[1]) is not target:
            assert status is not None
            why = f"the run is already {target}" if status is target else ""
            raise IllegalTransition(status.value, target.value, kind, why)
        state.status = target
    record_(state, event)
    if state.step_failures and kind not in _KEEPS_STEP_FAILURES:
        # Anything else recorded is progress (a new claimant is not): the count restarts.
        state.step_failures = 0
        state.last_step_failure = None
    state.seq = seq if seq is not None else state.seq + 1


def fold(events: Iterable[Event], start: RunState | None = None) -> RunState:
    """Fold ``events`` on top of ``start`` (a snapshot) or from nothing.

    Sequence numbers are counted from the start state's ``seq``.
    """
    state = start.copy() if start is not None else RunState()
    for e in events:
        apply(state, e)
    return state
