"""stead: durable LLM agent runs.

A run is an event-sourced state machine: every model turn, tool call, approval and
cancellation is a recorded transition, tool intent is written before the tool runs, finished
results are replayed instead of re-run, and a call whose outcome is uncertain is reconciled
or handed to a person, never blindly retried.
"""

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
from stead.errors import (
    Aborted,
    ApprovalError,
    Conflict,
    ConversationBusy,
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
    UnknownConversation,
    UserError,
)
from stead.runtime import Agent, Budget, Limits, PendingApproval, Runtime, RunView
from stead.runtime._inputs import Document, Image  # conversations and attachments (issue 12)
from stead.runtime._view import TurnCost  # cost on the view (issue 12)
from stead.tools import Done, NotDone, Tool, ToolContext, Unknown, question_tool, tool

__version__ = "0.1.0"

__all__ = [
    "AbortSignal",
    "Aborted",
    "Agent",
    "ApprovalError",
    "AssistantMessage",  # issue 12: conversations, attachments, cost
    "Attachment",  # issue 12: conversations, attachments, cost
    "Budget",
    "Conflict",
    "ConversationBusy",  # issue 12: conversations, attachments, cost
    "CorruptEvent",
    "Document",  # issue 12: conversations, attachments, cost
    "Done",
    "Fenced",
    "IllegalTransition",
    "Image",  # issue 12: conversations, attachments, cost
    "InvalidEvent",
    "InvalidInput",
    "LeaseHeld",
    "Limits",
    "ModelSettings",  # issue 12 (e-output): model settings
    "NotDone",
    "PendingApproval",
    "ProviderError",
    "ProviderHTTPError",
    "RecoveryPolicy",  # recovery at a takeover (issue 11)
    "RunLogFilter",
    "RunNotFound",
    "RunStatus",
    "RunView",
    "Runtime",
    "SteadError",
    "StoreError",
    "Tool",
    "ToolContext",
    "ToolResultMessage",  # issue 12: conversations, attachments, cost
    "TurnCost",  # issue 12: conversations, attachments, cost
    "Unknown",
    "UnknownAgent",
    "UnknownConversation",  # issue 12: conversations, attachments, cost
    "Usage",
    "UserError",
    "UserMessage",  # issue 12: conversations, attachments, cost
    "__version__",
    "configure_logging",  # issue 13: logging
    "question_tool",  # issue 12 (asking a person): Runtime.answer takes its answer
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
