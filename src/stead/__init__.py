"""stead: durable LLM agent runs.

A run is an event-sourced state machine: every model turn, tool call, approval and
cancellation is a recorded transition, tool intent is written before the tool runs, finished
results are replayed instead of re-run, and a call whose outcome is uncertain is reconciled
or handed to a person, never blindly retried.
"""

from stead import errors
from stead._logs import RunLogFilter, configure_logging, redact  # issue 13: logging
from stead._signal import AbortSignal
from stead.core.messages import (  # conversations and attachments (issue 12)
    AssistantMessage,
    Attachment,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from stead.core.reconcile import RecoveryPolicy  # recovery at a takeover (issue 11)
from stead.core.settings import ModelSettings  # issue 12 (e-output): model settings
from stead.core.states import RunStatus
from stead.errors import *  # noqa: F403 - every public error, listed once in errors.__all__
from stead.runtime import Agent, Budget, Limits, PendingApproval, Runtime, RunView
from stead.runtime.agent import Document, Image, TurnCost
from stead.tools import Done, NotDone, Tool, ToolContext, Unknown, question_tool, tool

__version__ = "0.1.0"

__all__ = [  # a run: its agent, limits, runtime and what it shows
    "AbortSignal",
    "Agent",
    "Budget",
    "Limits",
    "PendingApproval",
    "RunStatus",
    "RunView",
    "Runtime",
    "__version__",
]
__all__ += [  # tools
    "Done",
    "NotDone",
    "Tool",
    "ToolContext",
    "Unknown",
    "question_tool",  # issue 12 (asking a person): Runtime.answer takes its answer
    "tool",
]
__all__ += [  # issue 12: conversations, attachments, cost, model settings
    "AssistantMessage",
    "Attachment",
    "Document",
    "Image",
    "ModelSettings",
    "ToolResultMessage",
    "TurnCost",
    "Usage",
    "UserMessage",
]
__all__ += ["RecoveryPolicy"]  # recovery at a takeover (issue 11)
__all__ += ["RunLogFilter", "configure_logging", "redact"]  # issue 13: logging
__all__ += errors.__all__  # every public error (conversation errors of issue 12 too)
__all__.sort()


def __getattr__(name: str) -> object:
    """``stead.RunCancelled``, the old name of ``stead.Aborted``: still importable, with a
    ``DeprecationWarning`` (it shared its name with the event ``RunCancelled``)."""
    if name in errors._DEPRECATED:
        return getattr(errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
