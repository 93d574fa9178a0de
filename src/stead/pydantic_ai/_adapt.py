"""A Pydantic AI agent with ``SteadDurability`` as the ``stead.Agent`` that stands for it."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent as PaiAgent
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from stead.core.events import RunCreated
from stead.errors import UserError
from stead.foreign import Journal, foreign_agent, foreign_tool
from stead.pydantic_ai._convert import history_of
from stead.pydantic_ai._durability import ENGINE, SteadDurability
from stead.runtime import Agent
from stead.tools import Tool

_OPTIONS = ("effect", "reconcile", "requires_approval", "timeout", "retries")


def adapt(agent: PaiAgent[Any, Any]) -> Agent:
    """The ``stead.Agent`` for ``agent``; a ``UserError`` saying what is missing otherwise."""
    durability = SteadDurability.from_agent(agent)
    if durability is None:
        raise UserError(
            f"the Pydantic AI agent {agent.name!r} has no SteadDurability; build it with "
            "Agent(..., capabilities=[stead.pydantic_ai.SteadDurability()])"
        )
    name = durability.name or agent.name
    if not name:
        raise UserError("a Pydantic AI agent run by stead needs a name: Agent(..., name='...')")
    tools: list[Tool[..., Any]] = []
    others: list[str] = []
    for toolset in agent.toolsets:
        toolset.apply(lambda ts: tools.extend(_tools_of(name, ts, others)))
    if others:
        # Their tools are known only once listed, in a run; the run loop must know every tool
        # (and its effect class) before a reply is recorded, or the call is refused as unknown.
        raise UserError(
            f"Pydantic AI agent {name!r}: toolsets other than function tools "
            f"({', '.join(sorted(set(others)))}) are not supported under SteadDurability yet; "
            "give the agent function tools, or serve an MCP server's tools to a stead.Agent "
            "with stead.mcp.MCPTools"
        )

    async def launch(journal: Journal) -> object:
        earlier, text = _input(journal)
        return await agent.run(text, deps=journal.deps, message_history=earlier or None)

    model = agent.model
    model_name = getattr(model, "model_name", None) or (model if isinstance(model, str) else "")
    output = agent.output_type
    return foreign_agent(
        name,
        str(model_name or "pydantic-ai"),
        tools,
        launch,
        output_type=None if output is str else output,
        limits=durability.limits,
        budget=durability.budget,
        prices=durability.prices,
        durability=durability.durability,
    )


def _tools_of(agent: str, toolset: AbstractToolset[Any], others: list[str]) -> list[Tool[..., Any]]:
    if not isinstance(toolset, FunctionToolset):
        others.append(type(toolset).__name__)
        return []
    made: list[Tool[..., Any]] = []
    for tool in toolset.tools.values():
        what = f"Pydantic AI agent {agent!r}, tool {tool.name!r}"
        settings = (tool.metadata or {}).get(ENGINE) or {}
        if not isinstance(settings, dict):
            raise UserError(f"{what}: metadata[{ENGINE!r}] takes a dict of {', '.join(_OPTIONS)}")
        unknown = sorted(set(settings) - set(_OPTIONS))
        if unknown:
            raise UserError(
                f"{what}: metadata[{ENGINE!r}] has {', '.join(map(repr, unknown))}; "
                f"it takes {', '.join(_OPTIONS)}"
            )
        made.append(
            foreign_tool(
                tool.name,
                tool.function_schema.json_schema,
                description=tool.description or "",
                effect=settings.get("effect", "non_idempotent"),
                reconcile=settings.get("reconcile"),
                requires_approval=bool(tool.requires_approval)
                or settings.get("requires_approval", False),
                timeout=settings.get("timeout", tool.timeout),
                retries=settings.get("retries", 0),
                what=what,
            )
        )
    return made


def _input(journal: Journal) -> tuple[list[Any], str]:
    """The run's earlier messages (a conversation's) and its input, as the agent gets them."""
    created = journal.created
    earlier: list[Any] = []
    if isinstance(created, RunCreated) and created.history:
        earlier = history_of(list(created.history))
    return earlier, journal.state.input
