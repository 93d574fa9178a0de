"""One handler per event kind: what each event checks, and what it records.

``stead.core.fold.apply`` finds a handler by the event's kind and is the one place a status
changes: a handler returns the status its event moves the run to (or None), and ``apply``
checks that move against ``stead.core.states.TABLE``. Every check runs before the first
change, so a refused event leaves no trace; that is how a bad append is refused before it
is written. A moving event's handler only checks, and its ``after`` half records.

Adding an event: docs/adding-an-event.md.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

from stead.core.codegen import compile_copy
from stead.core.events import (
    AgentChanged,
    AgentRecorded,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageRecorded,
    EffectReconciled,
    Event,
    LoopDetected,
    ModelCallFailed,
    NoticeInjected,
    RedispatchRecorded,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunDeadlineSet,
    RunFailed,
    RunForked,
    RunRecovered,
    RunRequeued,
    RunStarted,
    RunTimedOut,
    StepFailed,
    ToolAttemptFailed,
    ToolCallDeferred,
    ToolCallRequested,
    ToolCallStarted,
    ToolOutcomeUnknown,
    ToolReconciled,
    ToolResultRecorded,
    ToolsListed,
    TraceLinked,
    TurnResumed,
    TurnStarted,
)
from stead.core.fold import (
    RECENT_CALLS,
    CallState,
    RunState,
    after,
    call_digest,
    count_turn,
    handles,
)
from stead.core.messages import AssistantMessage, NoticeMessage, ToolResultMessage, UserMessage
from stead.core.states import FINISHED, RunStatus, targets
from stead.errors import Conflict, IllegalTransition

_NO_CHECKS: Final = (RunStarted, RunFailed, RunTimedOut, RunRequeued)
"""Events that always move the run, from wherever the table allows, and check nothing more."""
_CLOSING: Final = {
    RunCompleted.kind: "calls without results remain",
    RunCancelled.kind: "every open call needs its cancelled result first",
}
"""Events that end a run where the table says once no call is left open (and why not)."""
_SOLE_TARGET: Final = {
    kind: next(iter(targets(kind))) for kind in (*(c.kind for c in _NO_CHECKS), *_CLOSING)
}


_ID: Final = operator.attrgetter("id")
"""A tool call's id (in C: no frame per call)."""


def by_the_table(state: RunState, event: Event) -> RunStatus:
    """The handler of an event with no checks of its own: it moves where ``TABLE`` says."""
    return _SOLE_TARGET[event.kind]


for _cls in _NO_CHECKS:
    handles(_cls)(by_the_table)


def _closing(state: RunState, event: Event) -> RunStatus:
    """The handler of an event that ends the run: refused while a call is open."""
    _refuse_open_calls(state, event, _CLOSING[event.kind])
    return _SOLE_TARGET[event.kind]


for _ending in (RunCompleted, RunCancelled):
    handles(_ending)(_closing)


def _refuse(state: RunState, event: Event, detail: str) -> IllegalTransition:
    current = state.status.value if state.status else "nothing"
    return IllegalTransition(current, current, event.kind, detail)


def _call(state: RunState, event: Any) -> CallState:
    """The current turn's call ``event`` names, or a refusal."""
    if event.turn_index != state.turn_index:
        raise _refuse(
            state, event, f"turn {event.turn_index} is not the current turn {state.turn_index}"
        )
    call = state.calls.get(event.tool_call_id)
    if call is None:
        raise _refuse(state, event, f"tool call {event.tool_call_id!r} was never requested")
    return call


def _attempt_of(state: RunState, event: Any, act: str) -> CallState:
    """The call an attempt event (started, failed) names, which must still be able to run:
    not settled, refused, or waiting on an approval decision."""
    call = _call(state, event)
    if call.result is not None or call.rejection is not None:
        raise _refuse(state, event, f"the call is settled or refused; it {act}")
    if event.tool_call_id in state.approvals:
        raise _refuse(state, event, "the call waits on an approval decision")
    return call


def _refuse_open_calls(state: RunState, event: Event, detail: str) -> None:
    """Refuse while a call of the current reply has no result (requested or not): what
    ``pending_calls`` and ``unrequested_calls`` say, without building either list (every
    turn that opens asks)."""
    calls = state.calls
    for call in calls.values():
        if call.result is None:
            raise _refuse(state, event, detail)
    reply = state.last_assistant()
    if reply is not None:
        for c in reply.tool_calls:
            if c.id not in calls:
                raise _refuse(state, event, detail)


def _refuse_after_reply(state: RunState, event: Any, detail: str) -> None:
    """Refuse unless ``event`` is of the current turn and that turn has no reply yet."""
    if state.turn_index < 0 or event.turn_index != state.turn_index or state.turn_has_reply:
        raise _refuse(state, event, detail)


# -- the run's life


@handles(RunCreated)
def _created(state: RunState, e: RunCreated) -> RunStatus:
    if state.status is not None:
        raise _refuse(state, e, "the run already exists")
    return RunStatus.QUEUED


@after(RunCreated)
def _after_created(state: RunState, e: RunCreated) -> None:
    state.run_id, state.agent, state.input = e.run_id, e.agent, e.input
    state.session_id, state.correlation_id = e.session_id, e.correlation_id
    state.config = dict(e.config or {})
    state.messages.extend(e.history)
    state.messages.append(UserMessage(content=e.input, attachments=e.attachments))
    state.call_ids.update(
        c.id for m in e.history if isinstance(m, AssistantMessage) for c in m.tool_calls
    )


@after(RunStarted)
def _after_started(state: RunState, e: RunStarted) -> None:
    state.owner, state.epoch = e.owner, e.epoch


@handles(RunRecovered)
def _recovered(state: RunState, e: RunRecovered) -> None:
    state.owner, state.epoch = e.owner, e.epoch


@after(RunCompleted)
def _after_completed(state: RunState, e: RunCompleted) -> None:
    state.output, state.stop_reason, state.data = e.output, e.stop_reason, e.data


@after(RunFailed)
def _after_failed(state: RunState, e: RunFailed) -> None:
    state.cancel_requested = None
    state.error = {"code": e.code, "phase": e.phase, "message": e.message}


def _noted(state: RunState, e: Event) -> None:
    """Notes for observers (a timeline, a tracer); the fold keeps nothing of them."""
    if state.status in FINISHED:
        raise _refuse(state, e, f"a {state.status} run is not being driven")


handles(ToolsListed)(_noted)
handles(TraceLinked)(_noted)


@handles(AgentRecorded)
def _agent_recorded(state: RunState, e: AgentRecorded) -> None:
    _noted(state, e)
    if state.agent_fingerprint:
        raise _refuse(state, e, "the run's agent version is recorded; a change is agent_changed")
    state.agent_fingerprint, state.agent_version = e.fingerprint, e.version


@handles(AgentChanged)
def _agent_changed(state: RunState, e: AgentChanged) -> None:
    _noted(state, e)
    if e.from_fingerprint != state.agent_fingerprint or e.to_fingerprint == e.from_fingerprint:
        raise _refuse(state, e, f"the run's agent version is {state.agent_fingerprint!r}")
    state.agent_fingerprint, state.agent_version = e.to_fingerprint, e.to_version


@handles(RunForked)
def _forked(state: RunState, e: RunForked) -> None:
    """A fork's lineage, written with its ``run_created``, before anything else happens."""
    if state.seq != 1:
        raise _refuse(state, e, "a run's lineage is recorded right after its creation")


@handles(RunCancelRequested)
def _cancel_requested(state: RunState, e: RunCancelRequested) -> None:
    if state.status in FINISHED:
        raise _refuse(state, e, f"a {state.status} run cannot be cancelled")
    state.cancel_requested = e.reason


@after(RunCancelled)
def _after_cancelled(state: RunState, e: RunCancelled) -> None:
    state.approvals, state.cancel_requested = {}, None
    state.error = {"code": "cancelled", "phase": "run", "message": e.reason}


@after(RunTimedOut)
def _after_timed_out(state: RunState, e: RunTimedOut) -> None:
    # Whose deadline passed: a pending approval's (when one has a deadline), else the run's.
    phase = "approval" if any(a.deadline is not None for a in state.approvals.values()) else "run"
    state.approvals, state.cancel_requested = {}, None
    state.error = {"code": "timed_out", "phase": phase, "message": e.reason}


@handles(RunDeadlineSet)
def _deadline_set(state: RunState, e: RunDeadlineSet) -> None:
    if state.status in FINISHED:
        raise _refuse(state, e, "a finished run has no deadline")
    state.deadline, state.deadline_counts_waiting = e.deadline, e.counts_waiting


@after(RunRequeued)
def _after_requeued(state: RunState, e: RunRequeued) -> None:
    state.deadline = None  # a resumed run starts a fresh deadline (its agent's, if any)


@handles(StepFailed)
def _step_failed(state: RunState, e: StepFailed) -> None:
    if state.status in FINISHED:
        raise _refuse(state, e, "a finished run has no step to fail")
    # No progress since the last failure means the same state, hence the same step
    # (next_step is a function of the log): consecutive failures are what counts.
    state.step_failures += 1
    state.last_step_failure = e


# -- turns and the model


@handles(TurnStarted)
def _turn_started(state: RunState, e: TurnStarted) -> RunStatus:
    if state.status is RunStatus.QUEUED:
        raise _refuse(state, e, "a queued run must be started (run_started) first")
    if e.turn_index != state.turn_index + 1:
        raise _refuse(state, e, f"turn {e.turn_index} after turn {state.turn_index}")
    if state.turn_index >= 0 and not state.turn_has_reply:
        raise _refuse(state, e, "the previous turn has no assistant message")
    _refuse_open_calls(state, e, "the current turn still has calls without results")
    if state.approvals:
        raise _refuse(state, e, "approvals are still pending")
    return RunStatus.RUNNING


@after(TurnStarted)
def _after_turn_started(state: RunState, e: TurnStarted) -> None:
    state.turn_index, state.turn_has_reply = e.turn_index, False
    state.calls, state.model_failures = {}, 0


@handles(TurnResumed)
def _turn_resumed(state: RunState, e: TurnResumed) -> RunStatus:
    if e.turn_index != state.turn_index or not state.pending_calls():
        raise _refuse(state, e, "no open turn with pending calls to resume")
    return RunStatus.AWAITING_TOOL


@handles(NoticeInjected)
def _notice(state: RunState, e: NoticeInjected) -> None:
    _refuse_after_reply(state, e, "a notice belongs to a turn before its reply")
    state.messages.append(NoticeMessage(content=e.content))


@handles(ModelCallFailed)
def _model_failed(state: RunState, e: ModelCallFailed) -> None:
    _refuse_after_reply(state, e, "no model call in progress for that turn")
    state.model_failures += 1
    if e.usage is not None:
        count_turn(state, e.turn_index, e.usage)


@handles(AssistantMessageRecorded)
def _reply(state: RunState, e: AssistantMessageRecorded) -> None:
    if state.turn_index < 0:
        raise _refuse(state, e, "no turn has started")
    if e.turn_index != state.turn_index or state.turn_has_reply:
        raise _refuse(state, e, "this turn already has an assistant message")
    if state.status is not RunStatus.RUNNING:
        raise _refuse(state, e, "a model reply needs a running run")
    ids = tuple(map(_ID, e.message.tool_calls))  # no comprehension frame, per reply
    if len(ids) > 1 and len(set(ids)) != len(ids):
        raise _refuse(state, e, "duplicate tool call ids in one reply")
    state.turn_has_reply = True
    state.messages.append(e.message)
    count_turn(state, e.turn_index, e.usage, e.model)
    state.call_ids.update(ids)


# -- tool calls


@handles(ToolCallRequested)
def _requested(state: RunState, e: ToolCallRequested) -> RunStatus | None:
    if e.turn_index != state.turn_index or not state.turn_has_reply:
        raise _refuse(state, e, "tool calls need this turn's assistant message first")
    reply = state.last_assistant()
    assert reply is not None
    for c in reply.tool_calls:
        if c.id == e.tool_call_id:
            break
    else:
        raise _refuse(state, e, f"{e.tool_call_id!r} is not in the reply")
    if e.tool_call_id in state.calls:
        raise Conflict(f"tool call {e.tool_call_id!r} is already requested")
    # A call refused on arrival is never awaited: its error result follows in the same
    # commit, and the run stays where it is. So is an accepted final result (its result and
    # run_completed follow in the same commit).
    return RunStatus.AWAITING_TOOL if e.rejection is None and not e.final else None


_NEW_CALL: Final[Callable[[ToolCallRequested], CallState]] = compile_copy(
    ToolCallRequested, CallState
)
"""A call's state as its request leaves it: every field the two share, copied."""


@after(ToolCallRequested)
def _after_requested(state: RunState, e: ToolCallRequested) -> None:
    state.calls[e.tool_call_id] = _NEW_CALL(e)
    state.tool_calls_total += 1
    state.recent_calls.append(call_digest(e.name, e.arguments))
    del state.recent_calls[:-RECENT_CALLS]


@handles(LoopDetected)
def _loop(state: RunState, e: LoopDetected) -> None:
    if _call(state, e).result is not None:
        raise _refuse(state, e, "a settled call cannot be intercepted")


@handles(ToolCallStarted)
def _call_started(state: RunState, e: ToolCallStarted) -> None:
    call = _attempt_of(state, e, "cannot start")
    if e.attempt != call.attempts + 1:
        raise _refuse(state, e, f"attempt {e.attempt} after {call.attempts}")
    call.attempts, call.reconciled, call.decision, call.unknown = e.attempt, None, None, False
    call.deferred = False


@handles(ToolResultRecorded)
def _result(state: RunState, e: ToolResultRecorded) -> None:
    call = _call(state, e)
    if call.result is not None:
        raise Conflict(
            f"a result for tool call {e.tool_call_id!r} in turn {e.turn_index} is already recorded"
        )
    if e.tool_call_id in state.approvals and e.source != "cancelled":
        raise _refuse(state, e, "the call waits on an approval decision")
    state.approvals.pop(e.tool_call_id, None)
    call.result = e
    state.messages.append(
        ToolResultMessage(
            tool_call_id=e.tool_call_id, name=e.name, content=e.content, is_error=e.is_error
        )
    )


@handles(ToolAttemptFailed)
def _attempt_failed(state: RunState, e: ToolAttemptFailed) -> None:
    call = _attempt_of(state, e, "has no attempt to fail")
    # A start-recorded (non_idempotent) attempt is the last started; another is one more.
    if e.attempt < 1 or e.attempt not in (call.attempts, call.attempts + 1):
        raise _refuse(state, e, f"attempt {e.attempt} after {call.attempts}")
    call.attempts, call.reconciled, call.decision = e.attempt, None, None


@handles(ToolCallDeferred)
def _deferred(state: RunState, e: ToolCallDeferred) -> None:
    call = _attempt_of(state, e, "has no attempt to defer")
    # A start-recorded (non_idempotent) attempt is the last started; another is one more.
    if e.attempt < 1 or e.attempt not in (call.attempts, call.attempts + 1):
        raise _refuse(state, e, f"attempt {e.attempt} after {call.attempts}")
    call.attempts, call.reconciled, call.decision, call.deferred = e.attempt, None, None, True


@handles(ToolOutcomeUnknown)
def _unknown(state: RunState, e: ToolOutcomeUnknown) -> None:
    call = _call(state, e)
    if not call.in_flight:
        raise _refuse(state, e, "only a started, unsettled call can be unknown")
    call.unknown = True


@handles(ToolReconciled)
def _reconciled(state: RunState, e: ToolReconciled) -> None:
    call = _call(state, e)
    if not call.in_flight:
        raise _refuse(state, e, "only a started, unsettled call is reconciled")
    call.reconciled = e.verdict


@handles(ApprovalRequested)
def _approval_requested(state: RunState, e: ApprovalRequested) -> RunStatus:
    if _call(state, e).result is not None or e.tool_call_id in state.approvals:
        raise _refuse(state, e, "the call is settled or already waiting")
    return RunStatus.AWAITING_APPROVAL


@after(ApprovalRequested)
def _after_approval_requested(state: RunState, e: ApprovalRequested) -> None:
    state.approvals[e.tool_call_id] = e


@handles(ApprovalDecided)
def _decided(state: RunState, e: ApprovalDecided) -> RunStatus | None:
    _call(state, e)
    if e.tool_call_id not in state.approvals:
        raise _refuse(state, e, "no approval is pending for that call")
    return RunStatus.AWAITING_TOOL if len(state.approvals) == 1 else None


@after(ApprovalDecided)
def _after_decided(state: RunState, e: ApprovalDecided) -> None:
    state.approvals = {k: v for k, v in state.approvals.items() if k != e.tool_call_id}
    call = state.calls[e.tool_call_id]
    call.decision = e.decision
    if e.arguments is not None:
        call.edited_arguments = e.arguments


# -- recovery at a takeover (stead.core.reconcile)


def _fenced_effect(state: RunState, e: Any) -> None:
    """Refuse a recovery record of a finished run, or of an owner the run has since left."""
    if state.status in FINISHED:
        raise _refuse(state, e, "a finished run has no effect to recover")
    if e.epoch != state.epoch:
        raise _refuse(state, e, f"epoch {e.epoch} is not the owner's epoch {state.epoch}")


@handles(EffectReconciled)
def _effect_reconciled(state: RunState, e: EffectReconciled) -> None:
    _fenced_effect(state, e)
    if e.turn_index != state.turn_index:
        raise _refuse(state, e, f"turn {e.turn_index} is not the current turn")
    call = _call(state, e) if e.tool_call_id else None
    if call is None:
        if state.turn_has_reply:
            raise _refuse(state, e, "the turn's model call already has its reply")
        if e.attempt != state.model_failures + 1:
            raise _refuse(state, e, f"attempt {e.attempt} is not the model call in flight")
        if e.verdict == "dispose":
            state.model_failures += 1  # spent: the turn's next call has a key of its own
        return
    if call.result is not None:
        raise _refuse(state, e, "the call already has its result")
    if e.attempt not in (call.attempts, call.attempts + 1) or e.attempt < 1:
        raise _refuse(state, e, f"attempt {e.attempt} is not the call's in flight")
    if e.verdict == "dispose":  # settled effect_unknown at that attempt
        call.attempts, call.unknown, call.reconciled, call.decision = e.attempt, True, None, None


@handles(RedispatchRecorded)
def _redispatch(state: RunState, e: RedispatchRecorded) -> None:
    # The order of one key's records is its redispatches' own fold (stead.core.reconcile).
    _fenced_effect(state, e)
    if (e.step == "given_up") != (e.attempt == 0):
        raise _refuse(state, e, "planned and dispatched count an attempt from 1; given_up none")
