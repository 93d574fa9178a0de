"""Builders of single run-level events: a run created, started, recovered, requeued, asked to
cancel, failed; a turn resumed; a model call or a step that failed. Each names what happened;
the runtime never constructs an event itself."""

from __future__ import annotations

from typing import Any, Final

from stead.core.events import (
    ModelCallFailed,
    RunCancelRequested,
    RunCreated,
    RunFailed,
    RunRecovered,
    RunRequeued,
    RunStarted,
    StepFailed,
    TurnResumed,
)
from stead.core.failures import FailurePhase
from stead.core.fold import RunState
from stead.core.messages import Attachment, Message, Usage

STEP_MESSAGE_LIMIT: Final = 1000
"""Characters of an exception's text a ``step_failed`` event keeps."""


def _storable(text: str, limit: int) -> str:
    """Text any store takes: at most ``limit`` characters, valid UTF-8 (a lone surrogate
    becomes ``?``), no NUL (PostgreSQL's jsonb refuses it)."""
    text = text[: limit * 2].encode("utf-8", "replace").decode("utf-8").replace("\x00", "\\0")
    return text[:limit]


def step_failed_event(step: str, error: BaseException) -> StepFailed:
    """Record that ``step`` raised ``error``: small and plain, so it can be stored even when
    what the step meant to write could not."""
    try:
        text = str(error)
    except Exception:  # an exception whose __str__ raises still gets recorded
        text = f"<{type(error).__name__} that cannot be printed>"
    return StepFailed(
        step=_storable(step, 200),
        error_type=_storable(type(error).__name__, 200),
        message=_storable(text, STEP_MESSAGE_LIMIT),
    )


def created_event(
    run_id: str,
    agent: str,
    input: str,
    *,
    session_id: str,
    correlation_id: str,
    config: Any,
    history: tuple[Message, ...] = (),
    attachments: tuple[Attachment, ...] = (),
    history_from: str = "",
) -> RunCreated:
    """A new run (``correlation_id`` defaults to the run's id), after ``history`` (after
    run ``history_from``'s whole history, then ``history``, when that is given)."""
    return RunCreated(
        run_id=run_id,
        agent=agent,
        input=input,
        session_id=session_id,
        correlation_id=correlation_id or run_id,
        config=config,
        history=history,
        history_from=history_from,
        attachments=attachments,
    )


def started_run_event(owner: str, epoch: int) -> RunStarted:
    """The claimant ``owner`` at ``epoch`` begins a queued run."""
    return RunStarted(owner=owner, epoch=epoch)


def recovered_event(owner: str, epoch: int, previous_owner: str) -> RunRecovered:
    """``owner`` took over a run ``previous_owner`` had been driving."""
    return RunRecovered(owner=owner, epoch=epoch, previous_owner=previous_owner)


def resumed_turn_event(turn_index: int) -> TurnResumed:
    """A turn interrupted before its reply was recorded begins again."""
    return TurnResumed(turn_index=turn_index)


def requeue_event(reason: str) -> RunRequeued:
    """A failed, cancelled or timed-out run goes back to ``queued``."""
    return RunRequeued(reason=reason)


def cancel_request_event(reason: str, by: str) -> RunCancelRequested:
    """Someone asks for the run to be cancelled (its owner acts on it)."""
    return RunCancelRequested(reason=reason, by=by)


MODEL_MESSAGE_LIMIT: Final = 2000
"""Characters of a provider's error text a ``model_call_failed`` event keeps."""


def model_failed_event(
    turn_index: int, attempt: int, code: str, message: str, usage: Usage | None = None
) -> ModelCallFailed:
    """One failed model call (``message`` cut to ``MODEL_MESSAGE_LIMIT``)."""
    return ModelCallFailed(
        turn_index=turn_index,
        attempt=attempt,
        code=code,
        message=message[:MODEL_MESSAGE_LIMIT],
        usage=usage,
    )


def run_failed_event(
    state: RunState,
    code: str,
    phase: FailurePhase,
    message: str,
    details: dict[str, Any] | None = None,
) -> RunFailed:
    """The run ends ``failed`` after the events of ``state``."""
    return RunFailed(code=code, phase=phase, message=message, last_seq=state.seq, details=details)
