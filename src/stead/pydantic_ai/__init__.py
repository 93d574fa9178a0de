"""stead under Pydantic AI: ``SteadDurability`` (``pip install 'stead[pydantic-ai]'``).

    from pydantic_ai import Agent
    from stead.pydantic_ai import SteadDurability

    agent = Agent("anthropic:claude-sonnet-4-5", name="support",
                  capabilities=[SteadDurability()])

    async with stead.Runtime("sqlite:///runs.db", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "Tell Ada her refund is on its way."))

The agent's model requests are the run's model turns and its tool calls the run's tool
calls: intent written before a call runs, its result replayed after a crash, a call in
flight recovered by its effect class (``metadata={"stead": {"effect": ...}}``), never blindly
run twice. See docs/pydantic-ai.md.
"""

from __future__ import annotations

try:
    import pydantic_ai as _pydantic_ai
except ImportError as exc:  # pragma: no cover - the extra is absent
    raise ImportError(
        "stead.pydantic_ai needs Pydantic AI: pip install 'stead[pydantic-ai]'"
    ) from exc

from stead.errors import UserError
from stead.foreign import current_tool_context
from stead.pydantic_ai._adapt import adapt
from stead.pydantic_ai._durability import ENGINE, SteadDurability
from stead.runtime import register_adapter
from stead.tools import ToolContext

__all__ = ["ENGINE", "SteadDurability", "adapt", "tool_context"]


def tool_context() -> ToolContext:
    """The ``stead.ToolContext`` of the call running now (its idempotency key, run id,
    ``aborted``), from inside a Pydantic AI tool; a ``UserError`` anywhere else."""
    ctx = current_tool_context()
    if ctx is None:
        raise UserError(
            "stead.pydantic_ai.tool_context() is for a tool of a SteadDurability agent while "
            "stead runs it"
        )
    return ctx


register_adapter(_pydantic_ai.Agent, adapt)
