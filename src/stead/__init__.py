"""stead: durable LLM agent runs.

A run is an event-sourced state machine: every model turn, tool call, approval and
cancellation is a recorded transition, tool intent is written before the tool runs, finished
results are replayed instead of re-run, and a call whose outcome is uncertain is reconciled
or handed to a person, never blindly retried.
"""

from stead._logs import RunLogFilter, configure_logging, redact  # issue 13: logging
from stead._signal import AbortSignal
from stead.core.messages import Usage
from stead.core.states import RunStatus
from stead.errors import (
    Aborted,
    ApprovalError,
    Conflict,
    CorruptEvent,
    Fenced,
    IllegalTransition,
    InvalidEvent,
    InvalidInput,
    LeaseHeld,
    ProviderError,
    ProviderHTTPError,
    RunNotFound,
    SteadError,
    StoreError,
    UnknownAgent,
    UserError,
)
from stead.runtime import Agent, Budget, Limits, PendingApproval, Runtime, RunView
from stead.tools import Done, NotDone, Tool, ToolContext, Unknown, tool

__version__ = "0.1.0"

__all__ = [
    "AbortSignal",
    "Aborted",
    "Agent",
    "ApprovalError",
    "Budget",
    "Conflict",
    "CorruptEvent",
    "Done",
    "Fenced",
    "IllegalTransition",
    "InvalidEvent",
    "InvalidInput",
    "LeaseHeld",
    "Limits",
    "NotDone",
    "PendingApproval",
    "ProviderError",
    "ProviderHTTPError",
    "RunLogFilter",
    "RunNotFound",
    "RunStatus",
    "RunView",
    "Runtime",
    "SteadError",
    "StoreError",
    "Tool",
    "ToolContext",
    "Unknown",
    "UnknownAgent",
    "Usage",
    "UserError",
    "__version__",
    "configure_logging",  # issue 13: logging
    "redact",  # issue 13: logging
    "tool",
]


def __getattr__(name: str) -> object:
    """``stead.RunCancelled``, the old name of ``stead.Aborted``: still importable, with a
    ``DeprecationWarning`` (it shared its name with the event ``RunCancelled``)."""
    from stead import errors

    if name in errors._DEPRECATED:
        return getattr(errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
