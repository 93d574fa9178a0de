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

from typing import Any

from stead.errors import UserError
from stead.foreign import current_tool_context
from stead.mcp import IDEMPOTENCY_META
from stead.pydantic_ai._adapt import adapt
from stead.pydantic_ai._durability import ENGINE, SteadDurability
from stead.runtime import register_adapter
from stead.tools import ToolContext

__all__ = ["ENGINE", "SteadDurability", "adapt", "send_idempotency_key", "tool_context"]


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


async def send_idempotency_key(ctx: Any, call_tool: Any, name: str, tool_args: Any) -> Any:
    """An ``MCPToolset``'s ``process_tool_call``: each call carries the stead call's
    idempotency key in the request's ``_meta`` (``stead/idempotency_key``), as
    ``stead.mcp``'s calls do, so the server can tell a call made again, and a reconcile
    function can ask it whether the call happened.

        MCPToolset(..., id="orders", process_tool_call=stead.pydantic_ai.send_idempotency_key)
    """
    running = current_tool_context()
    meta = {IDEMPOTENCY_META: running.idempotency_key} if running is not None else None
    return await call_tool(name, tool_args, metadata=meta)


register_adapter(_pydantic_ai.Agent, adapt)
