"""A ``create_agent`` agent (with ``SteadMiddleware``) as the ``stead.Agent`` for it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from stead.core.durability import Durability
from stead.core.events import EffectClass
from stead.core.limits import Budget, Limits
from stead.core.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from stead.core.pricing import PriceTable
from stead.errors import UserError
from stead.foreign import Journal, foreign_agent, foreign_tool
from stead.langchain._middleware import SEEN
from stead.runtime import Agent
from stead.tools import Reconciler, Tool

ENGINE = "stead"
"""The tool metadata key of per-tool settings (``tool.metadata = {"stead": {...}}``)."""

_OPTIONS = ("effect", "reconcile", "requires_approval", "timeout", "retries")

T = TypeVar("T", bound=BaseTool)


def effect(
    effect: EffectClass,
    *,
    reconcile: Reconciler | None = None,
    requires_approval: bool = False,
    timeout: float | None = None,
    retries: int | None = None,
) -> Callable[[T], T]:
    """Put stead's settings in a LangChain tool's ``metadata["stead"]``; goes above ``@tool``."""

    def mark(tool: T) -> T:
        if not isinstance(tool, BaseTool):
            raise UserError("stead.langchain.effect(...) goes above @tool, on the tool it makes")
        settings: dict[str, Any] = {"effect": effect, "requires_approval": requires_approval}
        if reconcile is not None:
            settings["reconcile"] = reconcile
        if timeout is not None:
            settings["timeout"] = timeout
        if retries is not None:
            settings["retries"] = retries
        tool.metadata = {**(tool.metadata or {}), ENGINE: settings}
        return tool

    return mark


def durable(
    graph: Any,
    *,
    name: str | None = None,
    limits: Limits | None = None,
    budget: Budget | None = None,
    prices: PriceTable | None = None,
    durability: Durability = "strict",
) -> Agent:
    """The ``stead.Agent`` for the agent ``create_agent(..., middleware=[SteadMiddleware()])``
    made: give it to ``stead.Runtime(agents=[...])`` or name it to the CLI."""
    label = name or getattr(graph, "name", None)
    if not label or label == "LangGraph":
        raise UserError(
            "a LangChain agent run by stead needs a name: create_agent(..., name='...')"
        )
    nodes = getattr(graph, "nodes", None)
    if nodes is None:
        raise UserError(f"stead.langchain.durable takes what create_agent returns, not {graph!r}")
    tools: list[Tool[..., Any]] = []
    node = nodes.get("tools")
    if node is not None:
        for tool in getattr(node.bound, "tools_by_name", {}).values():
            tools.append(_tool(label, tool))

    async def launch(journal: Journal) -> object:
        seen: list[bool] = []
        SEEN.set(seen)
        # The conversation before the run's input (Runtime.send), read from the log.
        earlier = messages_of(await journal.history())
        state = await graph.ainvoke({"messages": [*earlier, HumanMessage(journal.state.input)]})
        if not seen:
            raise UserError(
                f"LangChain agent {label!r} made its model calls without stead's middleware: "
                "create_agent(..., middleware=[stead.langchain.SteadMiddleware()])"
            )
        return state

    return foreign_agent(
        label,
        "langchain",
        tools,
        launch,
        limits=limits,
        budget=budget,
        prices=prices,
        durability=durability,
    )


def messages_of(history: Iterable[Message]) -> list[BaseMessage]:
    """Stead's messages as LangChain's: each tool call and its result under its call id
    (notices, to one run alone, are left out)."""
    out: list[BaseMessage] = []
    for m in history:
        if isinstance(m, UserMessage):
            out.append(HumanMessage(m.content))
        elif isinstance(m, AssistantMessage):
            calls = [
                ToolCall(id=c.id, name=c.name, args=json.loads(c.arguments or "{}"))
                for c in m.tool_calls
            ]
            out.append(AIMessage(content=m.text, tool_calls=calls))
        elif isinstance(m, ToolResultMessage):
            status = "error" if m.is_error else "success"
            out.append(
                ToolMessage(m.content, tool_call_id=m.tool_call_id, name=m.name, status=status)
            )
    return out


def _tool(agent: str, tool: BaseTool) -> Tool[..., Any]:
    what = f"LangChain agent {agent!r}, tool {tool.name!r}"
    settings = (tool.metadata or {}).get(ENGINE) or {}
    if not isinstance(settings, dict):
        raise UserError(f"{what}: metadata[{ENGINE!r}] takes a dict of {', '.join(_OPTIONS)}")
    unknown = sorted(set(settings) - set(_OPTIONS))
    if unknown:
        raise UserError(
            f"{what}: metadata[{ENGINE!r}] has {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(_OPTIONS)}"
        )
    schema = convert_to_openai_tool(tool)["function"].get("parameters") or {"type": "object"}
    return foreign_tool(
        tool.name,
        schema,
        description=tool.description or "",
        effect=settings.get("effect", "non_idempotent"),
        reconcile=settings.get("reconcile"),
        requires_approval=bool(settings.get("requires_approval", False)),
        timeout=settings.get("timeout"),
        retries=settings.get("retries", 0),
        what=what,
    )
