"""What a program defines and sees of a run: the ``Agent`` (its tools, typed output, deps and
inputs), asking a person, the checks of what a caller passes (and the run its id names),
and ``RunView``.

Imports nothing else of ``stead.runtime``; every other part of it may import this."""

from stead.runtime.agent import _checks as checks
from stead.runtime.agent._adapt import as_agent, register_adapter
from stead.runtime.agent._agent import Agent, loaded_from, with_loaded_from
from stead.runtime.agent._ask import Answering, ask_events
from stead.runtime.agent._children import ChildTool, agent_tool
from stead.runtime.agent._deps import check_deps
from stead.runtime.agent._ids import resolve_run_id, takes_id_prefix
from stead.runtime.agent._inputs import (
    AttachmentInput,
    Document,
    Image,
    attachment_bytes,
    chat_store,
    checked_history,
    history_of,
    store_attachments,
)
from stead.runtime.agent._output import Ended, Judged, judge, run_settings, with_settings
from stead.runtime.agent._view import PendingApproval, RunView, TurnCost

__all__ = [
    "Agent",
    "Answering",
    "AttachmentInput",
    "ChildTool",
    "Document",
    "Ended",
    "Image",
    "Judged",
    "PendingApproval",
    "RunView",
    "TurnCost",
    "agent_tool",
    "as_agent",
    "ask_events",
    "attachment_bytes",
    "chat_store",
    "check_deps",
    "checked_history",
    "checks",
    "history_of",
    "judge",
    "loaded_from",
    "register_adapter",
    "resolve_run_id",
    "run_settings",
    "store_attachments",
    "takes_id_prefix",
    "with_loaded_from",
    "with_settings",
]
