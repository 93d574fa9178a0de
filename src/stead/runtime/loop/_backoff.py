"""How long to wait before retrying a model call that failed with a retryable code."""

from __future__ import annotations

import random
from dataclasses import dataclass

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
