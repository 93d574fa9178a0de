"""stead under LangChain agents (``pip install 'stead[langchain]'``).

    from langchain.agents import create_agent
    import stead.langchain as sl

    @sl.effect("non_idempotent", reconcile=find_sent)
    @tool
    def send_message(to: str, text: str) -> str: ...

    graph = create_agent(model, [send_message], name="support",
                         middleware=[sl.SteadMiddleware()])
    support = sl.durable(graph)

The agent's model calls are the run's model turns and its tool calls the run's tool calls:
intent written before a call runs, its result recorded by call id and replayed after a crash,
a call in flight recovered by its effect class (``metadata={"stead": {...}}``), never
blindly run twice. No checkpointer is needed for this. See docs/langchain.md.
"""

from __future__ import annotations

try:
    import langchain.agents as _agents
except ImportError as exc:  # pragma: no cover - the extra is absent
    raise ImportError("stead.langchain needs LangChain: pip install 'stead[langchain]'") from exc

from stead.errors import UserError
from stead.foreign import current_tool_context
from stead.langchain._adapt import ENGINE, durable, effect
from stead.langchain._middleware import SteadMiddleware
from stead.tools import ToolContext

__all__ = ["ENGINE", "SteadMiddleware", "durable", "effect", "tool_context"]

del _agents


def tool_context() -> ToolContext:
    """The ``stead.ToolContext`` of the call running now (its idempotency key, run id,
    ``aborted``), from inside a LangChain tool; a ``UserError`` anywhere else."""
    ctx = current_tool_context()
    if ctx is None:
        raise UserError(
            "stead.langchain.tool_context() is for a tool of a durable(...) agent while "
            "stead runs it"
        )
    return ctx
