"""stead: durable LLM agent runs.

A run is an event-sourced state machine: every model turn, tool call, approval and
cancellation is a recorded transition, tool intent is written before the tool runs, finished
results are replayed instead of re-run, and a call whose outcome is uncertain is reconciled
or handed to a person, never blindly retried.

The public names (``__all__``, one sorted list), by topic:

- a run: ``Agent``, ``Limits``, ``Budget``, ``ModelSettings``, ``RecoveryPolicy``,
  ``Runtime``, ``RunView``, ``RunStatus``, ``PendingApproval``, ``TurnCost``, ``AbortSignal``
- tools: ``tool``, ``Tool``, ``ToolContext``, ``question_tool``, ``agent_tool`` (another
  agent as a tool, each call a child run); what a reconcile function
  answers: ``Done``, ``NotDone``, ``Unknown``
- conversations: ``UserMessage``, ``AssistantMessage``, ``ToolResultMessage``, ``Attachment``,
  ``Image``, ``Document``, ``Usage``
- logging: ``configure_logging``, ``RunLogFilter``, ``redact``
- errors, the tree drawn in ``stead.errors``: ``SteadError``, ``UserError``,
  ``InvalidInput``, ``ApprovalError``, ``AmbiguousId``, ``ImportFileError``, ``UnknownAgent``,
  ``UnknownConversation``,
  ``ConversationBusy``, ``RunNotFound``, ``IllegalTransition``, ``Conflict``, ``Fenced``,
  ``LeaseHeld``, ``ExecutorError``, ``InvalidEvent``, ``CorruptEvent``, ``SchemaTooNew``,
  ``StoreError``, ``DispatchRejected``, ``WaitTimeout``, ``ChildRunFailed``,
  ``ProviderError``, ``ProviderHTTPError``, ``ReplayDiverged``, ``Aborted``
- a run's life after it is recorded: ``Retention`` (what pruning keeps; export, import,
  fork and pruning are ``Runtime`` methods, see docs/lifecycle.md)
- ``__version__``
"""

from typing import TYPE_CHECKING

from stead import errors
from stead.errors import (
    Aborted,
    AmbiguousId,
    ApprovalError,
    ChildRunFailed,
    Conflict,
    ConversationBusy,
    CorruptEvent,
    DispatchRejected,
    ExecutorError,
    Fenced,
    IllegalTransition,
    ImportFileError,
    InvalidEvent,
    InvalidInput,
    LeaseHeld,
    ProviderError,
    ProviderHTTPError,
    ReplayDiverged,
    RunNotFound,
    SchemaTooNew,
    SteadError,
    StoreError,
    UnknownAgent,
    UnknownConversation,
    UserError,
    WaitTimeout,
)

if TYPE_CHECKING:
    from stead._logs import RunLogFilter, configure_logging, redact
    from stead._signal import AbortSignal
    from stead.core.messages import (
        AssistantMessage,
        Attachment,
        ToolResultMessage,
        Usage,
        UserMessage,
    )
    from stead.core.reconcile import RecoveryPolicy
    from stead.core.retention import Retention
    from stead.core.settings import ModelSettings
    from stead.core.states import RunStatus
    from stead.runtime import (
        Agent,
        Budget,
        Limits,
        PendingApproval,
        Runtime,
        RunView,
        agent_tool,
    )
    from stead.runtime.agent import Document, Image, TurnCost
    from stead.tools import Done, NotDone, Tool, ToolContext, Unknown, question_tool, tool

_LAZY: dict[str, str] = {
    **dict.fromkeys(["RunLogFilter", "configure_logging", "redact"], "stead._logs"),
    "AbortSignal": "stead._signal",
    **dict.fromkeys(
        ["AssistantMessage", "Attachment", "ToolResultMessage", "Usage", "UserMessage"],
        "stead.core.messages",
    ),
    "RecoveryPolicy": "stead.core.reconcile",
    "Retention": "stead.core.retention",
    "ModelSettings": "stead.core.settings",
    "RunStatus": "stead.core.states",
    **dict.fromkeys(
        ["Agent", "Budget", "Limits", "PendingApproval", "Runtime", "RunView", "agent_tool"],
        "stead.runtime",
    ),
    **dict.fromkeys(["Document", "Image", "TurnCost"], "stead.runtime.agent"),
    **dict.fromkeys(
        ["Done", "NotDone", "Tool", "ToolContext", "Unknown", "question_tool", "tool"],
        "stead.tools",
    ),
}
"""Where each public name that is not an error lives: imported on first use, so a program
that imports one part of stead (``stead --help``, a CLI command that only reads) does not
pay for the runtime, pydantic and the tools."""

__version__ = "0.1.0"

__all__ = [
    "AbortSignal",
    "Aborted",
    "Agent",
    "AmbiguousId",
    "ApprovalError",
    "AssistantMessage",
    "Attachment",
    "Budget",
    "ChildRunFailed",
    "Conflict",
    "ConversationBusy",
    "CorruptEvent",
    "DispatchRejected",
    "Document",
    "Done",
    "ExecutorError",
    "Fenced",
    "IllegalTransition",
    "Image",
    "ImportFileError",
    "InvalidEvent",
    "InvalidInput",
    "LeaseHeld",
    "Limits",
    "ModelSettings",
    "NotDone",
    "PendingApproval",
    "ProviderError",
    "ProviderHTTPError",
    "RecoveryPolicy",
    "ReplayDiverged",
    "Retention",
    "RunLogFilter",
    "RunNotFound",
    "RunStatus",
    "RunView",
    "Runtime",
    "SchemaTooNew",
    "SteadError",
    "StoreError",
    "Tool",
    "ToolContext",
    "ToolResultMessage",
    "TurnCost",
    "Unknown",
    "UnknownAgent",
    "UnknownConversation",
    "Usage",
    "UserError",
    "UserMessage",
    "WaitTimeout",
    "__version__",
    "agent_tool",
    "configure_logging",
    "question_tool",
    "redact",
    "tool",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (``_LAZY``); and
    ``stead.RunCancelled``, the old name of ``stead.Aborted``: still importable, with a
    ``DeprecationWarning`` (it shared its name with the event ``RunCancelled``)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # the next use is a plain attribute
        return value
    if name in errors._DEPRECATED:
        return getattr(errors, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
