"""How long to wait before retrying a model call that failed with a retryable code."""

from __future__ import annotations

import random
from dataclasses import dataclass

from stead.core.builders import model_failed_event, run_failed_event
from stead.core.decide import CallModel
from stead.core.effects import ModelFailed
from stead.core.events import Event
from stead.core.failures import is_retryable
from stead.core.fold import RunState
from stead.errors import UserError


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry delays for retryable model failures: exponential, jittered, capped.

    A provider's ``retry-after`` is honoured up to ``max_retry_wait``. One that asks for
    longer (``retry-after: 100000``, or a date in 2099) is not slept through while the lease
    renews and nothing happens: the call fails at once with its code (``rate_limited``...),
    and the ``run_failed`` record says how long the provider asked for and what the limit was.
    """

    base: float = 0.5
    """First delay, seconds."""
    cap: float = 30.0
    """Longest delay stead chooses itself."""
    max_retry_wait: float = 60.0
    """Longest ``retry-after`` honoured, seconds; a longer one ends the run instead."""

    def __post_init__(self) -> None:
        for name in ("base", "cap", "max_retry_wait"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0:
                raise UserError(f"Backoff.{name} must be a number of seconds >= 0, not {value!r}")

    def delay(self, attempt: int, retry_after: float | None, rand: random.Random) -> float:
        """Full jitter, but never sooner than the provider's ``retry-after`` (itself never
        longer than ``max_retry_wait``)."""
        jittered = rand.uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))
        return max(jittered, min(retry_after or 0.0, self.max_retry_wait))

    def refuses(self, retry_after: float | None) -> bool:
        """Does the provider ask to wait longer than this backoff will?"""
        return retry_after is not None and retry_after > self.max_retry_wait


def after_model_failure(
    state: RunState,
    step: CallModel,
    failure: ModelFailed,
    max_attempts: int,
    backoff: Backoff,
    rand: random.Random,
) -> tuple[list[Event], float | None]:
    """What a failed model call records, and how long to wait before it is tried again
    (None: it is not; the run fails with the events)."""
    failed = model_failed_event(
        step.turn_index, step.attempt, failure.code, failure.message, failure.usage
    )
    retry = is_retryable(failure.code) and step.attempt < max_attempts
    if retry and backoff.refuses(failure.retry_after):
        # Not a sleep of hours (or until 2099) with the lease renewing: fail now, with the
        # figures that say why.
        wait, most = failure.retry_after, backoff.max_retry_wait
        reason = (
            f"model call failed after {step.attempt} attempt(s): the provider asked to "
            f"retry after {wait:g}s, longer than Backoff.max_retry_wait ({most:g}s): "
            f"{failure.message}"
        )
        figures = {"retry_after": wait, "max_retry_wait": most, "attempt": step.attempt}
        return [failed, run_failed_event(state, failure.code, "model", reason, figures)], None
    if not retry:
        reason = f"model call failed after {step.attempt} attempt(s): {failure.message}"
        return [failed, run_failed_event(state, failure.code, "model", reason)], None
    return [failed], backoff.delay(step.attempt, failure.retry_after, rand)
