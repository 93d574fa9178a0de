"""Limits and budgets: the ceilings that stop a run even when the model would not.

Plain data, so the core can decide with them: ``next_step`` ends the run at ``max_turns``,
``reply_events`` refuses calls beyond ``max_tool_calls_per_turn`` and intercepts repeated
calls, and ``budget_breach`` halts a run *before* the turn that would overspend.
"""

from __future__ import annotations

from dataclasses import dataclass

from stead.errors import UserError


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Hard ceilings for a run."""

    max_turns: int = 50
    """Model turns per run; the last one is told to answer without tools."""
    max_tool_calls_per_turn: int = 64
    """Tool calls honoured from one reply; the rest get an error result."""
    max_model_attempts: int = 4
    """Attempts per model call when failures are retryable."""
    repeat_threshold: int = 3
    """The Nth identical call in a row (same tool, same canonical arguments) is intercepted."""
    approval_timeout: float | None = None
    """Seconds a person has to decide before the run times out (None: wait forever)."""
    cancel_grace: float = 5.0
    """Seconds tools get to stop after a cancel before their subprocesses are killed."""
    max_step_failures: int = 3
    """A step that raises this many times in a row (counted in the log, across processes)
    ends the run ``failed`` with code ``step_failed``, instead of being retried forever."""

    def __post_init__(self) -> None:
        for name in (
            "max_turns",
            "max_tool_calls_per_turn",
            "max_model_attempts",
            "max_step_failures",
        ):
            if getattr(self, name) < 1:
                raise UserError(f"Limits.{name} must be at least 1")
        if not 2 <= self.repeat_threshold <= 32:
            raise UserError("Limits.repeat_threshold must be between 2 and 32")
        if self.approval_timeout is not None and self.approval_timeout <= 0:
            raise UserError("Limits.approval_timeout must be positive (or None)")
        if self.cancel_grace < 0:
            raise UserError("Limits.cancel_grace must not be negative")


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Token and cost ceilings for a whole run, enforced before each model call."""

    max_input_tokens: int | None = None
    """Prompt tokens of all kinds (uncached, cache writes, cache reads)."""
    max_output_tokens: int | None = None
    """Generated tokens."""
    max_total_tokens: int | None = None
    """Everything."""
    max_usd: float | None = None
    """Dollars, priced with the model's entry in the price table."""

    @property
    def unlimited(self) -> bool:
        """No ceiling set at all."""
        return (
            self.max_input_tokens is None
            and self.max_output_tokens is None
            and self.max_total_tokens is None
            and self.max_usd is None
        )

    def to_json(self) -> dict[str, float | int | None]:
        """Plain JSON, for the failure record."""
        return {
            "max_input_tokens": self.max_input_tokens,
            "max_output_tokens": self.max_output_tokens,
            "max_total_tokens": self.max_total_tokens,
            "max_usd": self.max_usd,
        }
