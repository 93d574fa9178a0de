"""Agent delegation as child runs: a tool of a SteadDurability agent that runs another
SteadDurability agent (``await other.run(prompt, usage=ctx.usage)``, Pydantic AI's
agent delegation) starts a durable child run of it instead of running it inline.

The other agent's run would otherwise happen inside the tool's one call, as an opaque
function: its model requests unrecorded, repeated whole after a crash, its usage outside
the parent's budget. As a child run (``stead.ToolContext.run_child``) it is a run of its
own, created once per call and place, recovered on its own, held to the tree's budget and
``Limits.max_depth``, cancelled with its parent; the tool gets its output (typed when the
agent has an ``output_type``). The tool's code before the delegation runs again when the
child ends (see ``run_child``).
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.run import AgentRunResult

from stead.errors import UserError
from stead.foreign import current_tool_context
from stead.runtime import as_agent


async def delegated_run(agent: Any, ctx: RunContext[Any]) -> AgentRunResult[Any] | None:
    """The result of ``agent``'s run as a child run of the stead tool call it was started
    in; None where it was not started in one (a run stead launched, or any run outside a
    stead drive), which then runs as it is."""
    tool = current_tool_context()
    if tool is None or agent is None:
        return None
    prompt = ctx.prompt
    if not isinstance(prompt, str):
        raise UserError(
            f"agent {getattr(agent, 'name', None)!r} delegated to from a stead tool runs as a "
            "child run, whose input is text: give its run() a text prompt"
        )
    output = await tool.run_child(as_agent(agent), prompt)
    return AgentRunResult(output=output)
