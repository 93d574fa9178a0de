"""Limits and budgets: the ceilings that stop a run even when the model would not.

Plain data, so the core can decide with them: ``next_step`` ends the run at ``max_turns``,
``reply_events`` refuses calls beyond ``max_tool_calls_per_turn`` and intercepts repeated
calls, and ``budget_breach`` halts a run *before* the turn that would overspend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from stead.core.large_results import VIEWS, LargeResultView
from stead.core.result_bound import DEFAULT_MAX_RESULT, check_max_result
from stead.errors import UserError


def _show(value: object) -> str:
    """A value for an error message: its type and a short repr (a repr may be huge, or fail)."""
    try:
        text = repr(value)
    except Exception:  # a message must not fail because of the value
        text = "<unprintable>"
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _finite(value: float) -> bool:
    """A number a float holds and that is finite (an int beyond 1e308 is neither: adding it to
    a clock's float raises ``OverflowError``)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _count(owner: str, name: str, value: object, least: int, hint: str = "") -> None:
    """An int field: a real ``int`` (not a bool, not a float or a string) of at least ``least``.

    Checked once at construction, so a wrong value is the caller's error at the line that
    made it, not a ``TypeError`` deep in a run (or a ceiling that never fires).
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(
            f"{owner}.{name} takes an int of at least {least}{hint}, not {_show(value)}"
        )
    if value < least:
        raise UserError(f"{owner}.{name} must be at least {least}{hint}, not {_show(value)}")


def _seconds(owner: str, name: str, value: object, *, positive: bool, hint: str = "") -> None:
    """A float field (an int will do): finite, and positive or at least zero."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise UserError(f"{owner}.{name} takes a number of seconds{hint}, not {_show(value)}")
    if not _finite(value) or value < 0 or (positive and value == 0):
        what = "more than zero" if positive else "zero or more"
        raise UserError(
            f"{owner}.{name} must be a finite number of seconds, {what}{hint}, not {_show(value)}"
        )


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
    output_retries: int = 3
    """Invalid structured answers (``Agent(output_type=...)``) sent back to the model with
    their validation errors; the next invalid one fails the run ``output_invalid``."""
    max_duration: float | None = None
    """Seconds a run may take from its start before it ends ``timed_out`` (None: no limit).
    The deadline is recorded when the run starts (``run_deadline_set``), so whichever
    process holds the run, after any crash, ends it on time; a resume gives a fresh one."""
    duration_counts_waiting: bool = True
    """Whether time waiting on a person (an approval, a question) counts against
    ``max_duration``; when not, each wait moves the deadline later by its length."""
    max_tool_result: int = DEFAULT_MAX_RESULT
    """Characters of a tool's result (or failure) a run keeps, for every tool of the agent
    that sets no ``@tool(max_result=...)`` of its own; a longer one is cut, with a note the
    model reads, before it is recorded (``stead.core.result_bound``)."""
    result_by_reference: int | None = None
    """Characters past which a tool's result is stored once, by digest, beside the log
    instead of in its event row (``stead.core.large_results``); None: every result is kept
    in its row. What the model sees of such a result is ``large_result_view``."""
    large_result_view: LargeResultView = "whole"
    """What the model reads of a result stored by reference: ``whole`` (the text, put back
    at each request), ``head`` (its first ``large_result_head`` characters and a note with
    its handle) or ``handle`` (only the note: a tool reads it by its handle)."""
    large_result_head: int = 2000
    """Characters of a stored result a ``head`` view shows."""
    max_depth: int = 3
    """How deep a tree of child runs may grow below a root run (``stead.agent_tool``): a
    call that would start a child deeper than this gets an error result instead."""

    def __post_init__(self) -> None:
        _count("Limits", "max_turns", self.max_turns, 1)
        _count("Limits", "max_depth", self.max_depth, 0)
        _count("Limits", "large_result_head", self.large_result_head, 0)
        if self.result_by_reference is not None:
            _count("Limits", "result_by_reference", self.result_by_reference, 1, " (None: never)")
        if self.large_result_view not in VIEWS:
            raise UserError(
                f"Limits.large_result_view takes one of {', '.join(VIEWS)}, "
                f"not {_show(self.large_result_view)}"
            )
        _count("Limits", "max_tool_calls_per_turn", self.max_tool_calls_per_turn, 1)
        _count("Limits", "max_model_attempts", self.max_model_attempts, 1)
        _count("Limits", "max_step_failures", self.max_step_failures, 1)
        _count("Limits", "output_retries", self.output_retries, 0)
        _count("Limits", "repeat_threshold", self.repeat_threshold, 2)
        if self.repeat_threshold > 32:
            raise UserError(
                "Limits.repeat_threshold must be between 2 and 32, "
                f"not {_show(self.repeat_threshold)}"
            )
        if self.approval_timeout is not None:
            _seconds(
                "Limits",
                "approval_timeout",
                self.approval_timeout,
                positive=True,
                hint=" (None waits forever)",
            )
        _seconds("Limits", "cancel_grace", self.cancel_grace, positive=False)
        if self.max_duration is not None:
            _seconds(
                "Limits", "max_duration", self.max_duration, positive=True, hint=" (None: no limit)"
            )
        check_max_result(self.max_tool_result, "Limits.max_tool_result")
        if not isinstance(self.duration_counts_waiting, bool):
            raise UserError(
                "Limits.duration_counts_waiting takes True or False, "
                f"not {_show(self.duration_counts_waiting)}"
            )


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

    def __post_init__(self) -> None:
        for name in ("max_input_tokens", "max_output_tokens", "max_total_tokens"):
            value = getattr(self, name)
            if value is not None:
                _count("Budget", name, value, 1, " (None for no ceiling)")
        if self.max_usd is not None:
            if not isinstance(self.max_usd, int | float) or isinstance(self.max_usd, bool):
                raise UserError(
                    f"Budget.max_usd takes a number of dollars (or None), not {_show(self.max_usd)}"
                )
            if not _finite(self.max_usd) or self.max_usd <= 0:
                raise UserError(
                    f"Budget.max_usd must be a finite positive number of dollars (None for no "
                    f"ceiling), not {_show(self.max_usd)}"
                )

    @property
    def unlimited(self) -> bool:
        """No ceiling set at all."""
        return (
            self.max_input_tokens is None
            and self.max_output_tokens is None
            and self.max_total_tokens is None
            and self.max_usd is None
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Budget:
        """The budget ``to_json`` wrote (a child run's link carries its tree's)."""
        known = ("max_input_tokens", "max_output_tokens", "max_total_tokens", "max_usd")
        return cls(**{k: data[k] for k in known if data.get(k) is not None})

    def to_json(self) -> dict[str, float | int | None]:
        """Plain JSON, for the failure record."""
        return {
            "max_input_tokens": self.max_input_tokens,
            "max_output_tokens": self.max_output_tokens,
            "max_total_tokens": self.max_total_tokens,
            "max_usd": self.max_usd,
        }
