"""Stable failure codes and the one function that says whether a code is worth retrying.

Retryability is a property of the code, never stored beside it: a record that said
``retryable: true`` could disagree with the code after an upgrade; a function cannot.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

ModelFailureCode = Literal[
    "rate_limited",
    "authentication_failed",
    "billing",
    "provider_unavailable",
    "bad_request",
    "context_length_exceeded",
    "connection_failed",
    "deadline_exceeded",
    "malformed_result",
    "executor_error",
]

FailurePhase = Literal["model", "runtime"]
"""Where a run failed (``RunFailed.phase``): the model call (its attempts or the budget of the
next one), or the runtime (a step that kept failing). A run's ``error`` also says ``run`` for
a cancel and ``approval`` for a timeout, which are not failures."""

MODEL_FAILURE_CODES: Final = frozenset(get_args(ModelFailureCode))

RETRYABLE: Final = frozenset(
    {"rate_limited", "provider_unavailable", "connection_failed", "deadline_exceeded"}
)
"""Codes a later attempt may not hit. ``deadline_exceeded`` (a read timeout, an HTTP 408, or
a provider's overall ``deadline`` for the call, stream included) is one, as the official SDKs
treat timeouts: a stalled stream or a slow replica is usually gone on the next try, and the
attempts are bounded by ``Limits.max_model_attempts`` and each by its deadline."""


def is_retryable(code: str) -> bool:
    """Whether a failure with this code may be retried automatically (with backoff)."""
    return code in RETRYABLE


def code_for_status(status: int) -> ModelFailureCode:
    """Map an HTTP status from a model provider to its stable code."""
    if status == 429:
        return "rate_limited"
    if status in (401, 403):
        return "authentication_failed"
    if status == 402:
        return "billing"
    if status >= 500 or status == 529:
        return "provider_unavailable"
    if status == 408:
        return "deadline_exceeded"
    return "bad_request"
