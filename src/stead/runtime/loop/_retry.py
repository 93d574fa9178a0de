"""A tool's retries (``@tool(retries=...)``): whether a failed attempt runs again.

Only where the effect class allows it: a ``read_only`` or ``idempotent_write`` call runs
again as it is (the same idempotency key); a ``non_idempotent`` one only through its
reconcile function (``@tool`` refuses retries without one), which the next plan asks whether
the failed attempt took effect before attempt N+1 starts. Each failed attempt is recorded
(``tool_attempt_failed``, with its backoff) before the wait, so a crash in the wait resumes
with the same count; the last failure is the call's result.
"""

from __future__ import annotations

import random
from typing import Any

from stead.core.builders import attempt_failed_event
from stead.core.effects import Outcome, ToolFailed
from stead.core.events import ToolAttemptFailed
from stead.core.fold import CallState
from stead.runtime.loop._backoff import Backoff
from stead.tools import Tool


def retry_event(
    tool: Tool[..., Any] | None,
    call: CallState,
    attempt: int,
    outcome: Outcome,
    backoff: Backoff,
    rand: random.Random,
) -> ToolAttemptFailed | None:
    """The record of a failed ``attempt`` that may run again, or None (the failure stands)."""
    if tool is None or not tool.retries or not isinstance(outcome, ToolFailed):
        return None
    if attempt > tool.retries:
        return None
    if call.effect_class == "non_idempotent" and tool.reconcile is None:
        return None  # never blindly again (a definition changed since the call began)
    return attempt_failed_event(call, attempt, outcome.failure, backoff.delay(attempt, None, rand))
