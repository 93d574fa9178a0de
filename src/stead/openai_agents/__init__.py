"""stead under the OpenAI Agents SDK (``pip install 'stead[openai-agents]'``).

    from agents import Agent, function_tool
    import stead.openai_agents as sa

    @sa.effect("non_idempotent", reconcile=find_sent)
    @function_tool
    def send_message(to: str, text: str) -> str: ...

    support = sa.durable(Agent(name="support", model=model, tools=[send_message]))

    async with stead.Runtime("sqlite:///runs.db", agents=[support]) as rt:
        view = await rt.run(await rt.start(support, "Tell Ada her refund is on its way."))

The agent's model requests are the run's model turns and its tool calls the run's tool
calls: intent written before a call runs, its result replayed after a crash, a call in flight
recovered by its effect class, never blindly run twice. See docs/openai-agents.md.
"""

from __future__ import annotations

try:
    import agents as _agents
except ImportError as exc:  # pragma: no cover - the extra is absent
    raise ImportError(
        "stead.openai_agents needs the OpenAI Agents SDK: pip install 'stead[openai-agents]'"
    ) from exc

from stead.errors import UserError
from stead.foreign import current_tool_context
from stead.openai_agents._adapt import ToolSettings, durable, effect
from stead.openai_agents._model import JournaledModel
from stead.openai_agents._session import SteadSession
from stead.tools import ToolContext

__all__ = ["JournaledModel", "SteadSession", "ToolSettings", "durable", "effect", "tool_context"]

del _agents


def tool_context() -> ToolContext:
    """The ``stead.ToolContext`` of the call running now (its idempotency key, run id,
    ``aborted``), from inside an Agents SDK tool; a ``UserError`` anywhere else."""
    ctx = current_tool_context()
    if ctx is None:
        raise UserError(
            "stead.openai_agents.tool_context() is for a tool of a durable(...) agent while "
            "stead runs it"
        )
    return ctx
