"""A Pydantic AI agent with ``SteadDurability`` as the ``stead.Agent`` that stands for it."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent as PaiAgent
from pydantic_ai.toolsets import FunctionToolset

from stead.core.events import RunCreated
from stead.errors import UserError
from stead.foreign import Journal, foreign_agent, foreign_tool
from stead.pydantic_ai._convert import history_of
from stead.pydantic_ai._durability import SteadDurability
from stead.pydantic_ai._toolsets import (
    Listing,
    discover,
    leaves,
    mcp_effect,
    setters,
    settings_of,
)
from stead.runtime import Agent
from stead.tools import Tool


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
    tools = _tools(name, agent)
    durability.listings = {
        getattr(t.source, "name", ""): t.source for t in tools if isinstance(t.source, Listing)
    }

    checks = _has_output_validators(agent)

    async def launch(journal: Journal) -> object:
        if not checks and _has_output_validators(agent):
            raise UserError(
                f"Pydantic AI agent {name!r}: an output validator was added after the agent "
                "was given to stead, which asks it about each final answer only if it had one "
                "then; add @agent.output_validator before Runtime(agents=[...])"
            )
        earlier, text = _input(journal)
        result = await agent.run(text, deps=journal.deps, message_history=earlier or None)
        return result.output

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
        checks_end=checks,
    )


def _tools(agent_name: str, agent: PaiAgent[Any, Any]) -> list[Tool[..., Any]]:
    """Every tool of the agent's toolsets as a stead tool (``_toolsets``)."""
    found = leaves(agent_name, list(agent.toolsets))
    agent_setters = setters(agent)
    listed, chosen = discover(agent_name, found, agent_setters)
    made: list[Tool[..., Any]] = []
    for i, leaf in enumerate(found):
        ts = leaf.toolset
        if isinstance(ts, FunctionToolset):
            for tool in ts.tools.values():
                what = f"Pydantic AI agent {agent_name!r}, tool {tool.name!r}"
                settings = settings_of(
                    what, tool.metadata, leaf.metadata, *chosen.get((i, tool.name), [])
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
            continue
        source = ts.id
        if not source:
            raise UserError(
                f"Pydantic AI agent {agent_name!r}: an MCPToolset under SteadDurability needs "
                "an id (MCPToolset(..., id='orders')): runs record its tools under it"
            )
        listing = Listing(source, listed[i])
        for tool_name, td in listing.tool_defs.items():
            what = f"Pydantic AI agent {agent_name!r}, MCP server {source!r}, tool {tool_name!r}"
            settings = settings_of(what, leaf.metadata, *chosen.get((i, tool_name), []))
            effect = mcp_effect(settings, td)
            listing.effects[tool_name] = effect
            made.append(
                foreign_tool(
                    tool_name,
                    td.parameters_json_schema,
                    description=td.description or "",
                    effect=effect,
                    reconcile=settings.get("reconcile"),
                    requires_approval=settings.get("requires_approval", False),
                    timeout=settings.get("timeout", td.timeout),
                    retries=settings.get("retries", 0),
                    what=what,
                    source=listing,
                )
            )
    return made


def _has_output_validators(agent: PaiAgent[Any, Any]) -> bool:
    """The agent checks its final answers itself (``@agent.output_validator``): stead asks it
    before it records an answer that ends a run (``foreign_agent(checks_end=True)``)."""
    return bool(getattr(agent, "_output_validators", None))


def _input(journal: Journal) -> tuple[list[Any], str]:
    """The run's earlier messages (a conversation's) and its input, as the agent gets them."""
    created = journal.created
    earlier: list[Any] = []
    if isinstance(created, RunCreated) and created.history:
        earlier = history_of(list(created.history))
    return earlier, journal.state.input
