"""A Pydantic AI agent's toolsets as the tools its ``stead.Agent`` knows before any run.

The run loop must know every tool, and its effect class, before it records a reply that calls
it (the intent carries the class). A function tool is known as the agent is built. An MCP
server's tools are known once listed: each ``MCPToolset`` is listed here, once, when the agent
is given to stead (on a fresh session of its own, in a thread with its own event loop, so the
user's toolset is never entered on a loop it will not run on), and the run's Pydantic AI side
is then answered from that same listing (``Listing``), so the model is offered exactly the
tools the run loop admits and a replay sees the tools the run recorded (``tools_listed``).

Per-tool settings (``{"stead": {...}}``) come from, in order, the tool's own metadata, a
``SetMetadataToolset`` around its toolset, and the agent's ``SetToolMetadata`` capabilities
(their selectors are evaluated once, here); an MCP tool without an ``effect`` takes its class
from its annotations (``readOnlyHint``, ``idempotentHint``), as ``stead.mcp`` does.

A ``DynamicToolset`` (``@agent.toolset``) is refused: its function builds the tools per run,
so no listing made before the run can stand for them.
"""

from __future__ import annotations

import asyncio
import copy
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from pydantic_ai import Agent as PaiAgent
from pydantic_ai import RunContext
from pydantic_ai.capabilities import SetToolMetadata
from pydantic_ai.capabilities.abstract import leaf_capabilities
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import ToolDefinition, matches_tool_selector
from pydantic_ai.toolsets import (
    AbstractToolset,
    CombinedToolset,
    DynamicToolset,
    FunctionToolset,
    PrefixedToolset,
    RenamedToolset,
    SetMetadataToolset,
    WrapperToolset,
)
from pydantic_ai.usage import RunUsage

from stead.errors import UserError

if TYPE_CHECKING:
    from pydantic_ai.mcp import MCPToolset

ENGINE = "stead"
"""The engine's name, and the tool metadata key of per-tool settings (``metadata={"stead":
{...}}``)."""
OPTIONS = ("effect", "reconcile", "requires_approval", "timeout", "retries")


@dataclass(frozen=True, slots=True)
class Leaf:
    """A toolset whose tools become stead tools, with the metadata its wrappers set."""

    toolset: AbstractToolset[Any]
    metadata: Mapping[str, Any]


@dataclass(slots=True)
class Listing:
    """What an ``MCPToolset`` listed when the agent was given to stead: its tools as Pydantic
    AI defines them, and each one's definition as the run records it (``tools_listed``)."""

    name: str
    tool_defs: dict[str, ToolDefinition]
    effects: dict[str, str] = field(default_factory=dict)

    def definitions(self) -> dict[str, Any]:
        return {
            n: {
                "description": td.description or "",
                "inputSchema": td.parameters_json_schema,
                "annotations": (td.metadata or {}).get("annotations"),
                "effect": self.effects.get(n, ""),
            }
            for n, td in self.tool_defs.items()
        }


def leaves(agent_name: str, toolsets: list[AbstractToolset[Any]]) -> list[Leaf]:
    """The agent's leaf toolsets, with the metadata the wrappers around each set; a
    ``UserError`` for a toolset stead cannot know the tools of before a run."""
    found: list[Leaf] = []

    def walk(ts: AbstractToolset[Any], metadata: Mapping[str, Any]) -> None:
        if isinstance(ts, SetMetadataToolset):
            walk(ts.wrapped, {**metadata, **ts.metadata})
        elif isinstance(ts, PrefixedToolset | RenamedToolset):
            raise UserError(
                f"Pydantic AI agent {agent_name!r}: a {type(ts).__name__} renames its tools, "
                "which SteadDurability does not follow; name the tools as the model should see "
                "them"
            )
        elif isinstance(ts, WrapperToolset):
            walk(ts.wrapped, metadata)
        elif isinstance(ts, CombinedToolset):
            for inner in ts.toolsets:
                walk(inner, metadata)
        elif isinstance(ts, FunctionToolset) or _is_mcp(ts):
            found.append(Leaf(ts, metadata))
        elif isinstance(ts, DynamicToolset):
            raise UserError(
                f"Pydantic AI agent {agent_name!r}: a dynamic toolset (@agent.toolset, "
                "DynamicToolset) builds its tools per run, so stead cannot know them, nor their "
                "effect classes, before a reply calling them is recorded; give the agent the "
                "toolset itself (toolsets=[...]: function tools, or an MCPToolset with an id)"
            )
        else:
            raise UserError(
                f"Pydantic AI agent {agent_name!r}: toolsets of kind {type(ts).__name__} are "
                "not supported under SteadDurability; give the agent function tools or an "
                "MCPToolset"
            )

    for ts in toolsets:
        walk(ts, {})
    return found


def setters(agent: PaiAgent[Any, Any]) -> list[SetToolMetadata[Any]]:
    """The agent's ``SetToolMetadata`` capabilities that carry stead settings."""
    return [
        c
        for c in leaf_capabilities(agent.root_capability)
        if isinstance(c, SetToolMetadata) and ENGINE in c.metadata
    ]


def settings_of(what: str, *layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``"stead"`` settings of one tool, later layers winning; checked."""
    merged: dict[str, Any] = {}
    for layer in layers:
        got = (layer or {}).get(ENGINE)
        if got is None:
            continue
        if not isinstance(got, Mapping):
            raise UserError(f"{what}: metadata[{ENGINE!r}] takes a dict of {', '.join(OPTIONS)}")
        merged.update(got)
    if "queue" in merged:
        raise UserError(
            f"{what}: queue is not supported under SteadDurability: a Pydantic AI tool runs in "
            "the process that drives its agent (its RunContext, deps and the agent's own loop), "
            "which an executor pool cannot be; serve that work as a stead @tool of a "
            "stead.Agent, or drop the queue"
        )
    unknown = sorted(set(merged) - set(OPTIONS))
    if unknown:
        raise UserError(
            f"{what}: metadata[{ENGINE!r}] has {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(OPTIONS)}"
        )
    return merged


def _context() -> RunContext[Any]:
    """A run context for listing and for selectors evaluated before any run."""
    return RunContext(deps=None, model=TestModel(), usage=RunUsage())


async def _selected(agent_setters: list[SetToolMetadata[Any]], td: ToolDefinition) -> list[Any]:
    ctx = _context()
    return [s.metadata for s in agent_setters if await matches_tool_selector(s.tools, ctx, td)]


def _is_mcp(toolset: object) -> TypeGuard[MCPToolset]:
    """Whether ``toolset`` is an ``MCPToolset``, without importing ``pydantic_ai.mcp`` (it
    brings in the MCP SDK: most of a second of every process that gives an agent to stead).
    An agent holding an ``MCPToolset`` has imported that module already, so when it is not
    loaded, no toolset can be one."""
    module = sys.modules.get("pydantic_ai.mcp")
    return module is not None and isinstance(toolset, module.MCPToolset)


async def _discover(
    leaves_: list[Leaf], agent_setters: list[SetToolMetadata[Any]]
) -> tuple[dict[int, dict[str, ToolDefinition]], dict[tuple[int, str], list[Any]]]:
    """Each MCP leaf's tools (listed on a fresh session) and, per (leaf, tool), the metadata
    of the ``SetToolMetadata`` capabilities that select it."""
    listed: dict[int, dict[str, ToolDefinition]] = {}
    chosen: dict[tuple[int, str], list[Any]] = {}
    for i, leaf in enumerate(leaves_):
        ts = leaf.toolset
        if _is_mcp(ts):
            fresh = copy.copy(ts)
            vars(fresh).pop("_enter_lock", None)  # binds to this thread's loop instead
            fresh.client = ts.client.new()
            fresh._cached_tools = None
            async with fresh:
                tools = await fresh.get_tools(_context())
            listed[i] = {name: t.tool_def for name, t in tools.items()}
            defs = list(listed[i].values())
        else:
            assert isinstance(ts, FunctionToolset)
            defs = [t.tool_def for t in ts.tools.values()]
        if agent_setters:
            for td in defs:
                chosen[(i, td.name)] = await _selected(agent_setters, td)
    return listed, chosen


def discover(
    agent_name: str, leaves_: list[Leaf], agent_setters: list[SetToolMetadata[Any]]
) -> tuple[dict[int, dict[str, ToolDefinition]], dict[tuple[int, str], list[Any]]]:
    """``_discover`` run to its end before this returns, on an event loop of its own (the
    caller may be inside a running one: ``Runtime(agents=...)`` in an async ``main``)."""
    if not agent_setters and not any(_is_mcp(leaf.toolset) for leaf in leaves_):
        return {}, {}
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(asyncio.run(_discover(leaves_, agent_setters)))
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, name=f"stead-list-{agent_name}", daemon=True)
    thread.start()
    thread.join()
    got = out[0]
    if isinstance(got, UserError):
        raise got
    if isinstance(got, BaseException):
        raise UserError(
            f"Pydantic AI agent {agent_name!r}: listing its MCP servers' tools failed: "
            f"{type(got).__name__}: {got}; stead lists them when the agent is given to it, "
            "so the servers must be reachable then"
        ) from got
    result: tuple[dict[int, dict[str, ToolDefinition]], dict[tuple[int, str], list[Any]]] = got
    return result


def mcp_effect(settings: Mapping[str, Any], td: ToolDefinition) -> Any:
    """The effect class of an MCP tool: its settings', else its annotations'."""
    if "effect" in settings:
        return settings["effect"]
    from stead.mcp import effect_from_annotations

    annotations = (td.metadata or {}).get("annotations") or {}
    return effect_from_annotations(_Hints(annotations))


class _Hints:
    """MCP annotations as Pydantic AI keeps them (the wire's camelCase keys), read as
    ``stead.mcp.effect_from_annotations`` reads the SDK's."""

    def __init__(self, annotations: Mapping[str, Any]) -> None:
        self.read_only_hint = annotations.get("readOnlyHint")
        self.idempotent_hint = annotations.get("idempotentHint")
