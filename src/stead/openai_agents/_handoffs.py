"""Handoffs within one stead run: the agents an agent can hand off to, journaled alike.

The SDK's ``Runner`` switches its current agent when a reply calls a handoff tool
(``transfer_to_billing``): the rest of the run asks that agent's model, with that agent's
tools. Under stead every agent reachable by handoff is copied as the first one is (its model
journaled, its function tools handing each call to the journal), and each handoff leads to
the copy of its target, so a replay after a crash reads the recorded replies, takes the same
handoff again and goes on with the agent that had been handed to, its tools recovered by the
effect classes given for them (one set for the whole run, from ``@effect`` or the mapping).

The handoff call itself is a recorded tool call of the run: ``read_only``, its result the
SDK's transfer message (``{"assistant": "billing"}``), decided from the log alone (the first
handoff of a reply is taken, the SDK ignores the others), so recording it never waits on
the SDK. A handoff's ``on_handoff`` callback runs in the SDK each time the run is driven
(it is not a tool): keep side effects in tools.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from agents import Agent as SdkAgent
from agents import Handoff, handoff
from agents.run_context import RunContextWrapper

from stead.core.effects import ToolSucceeded
from stead.errors import UserError
from stead.foreign import current_journal
from stead.tools import SchemaTool, Tool, ToolContext

Graph = Sequence[tuple[SdkAgent[Any], Sequence[tuple[Handoff[Any, Any], SdkAgent[Any]]]]]
"""Every agent reachable by handoff from the first (first), with its handoffs and targets."""

IGNORED = "Multiple handoffs detected, ignoring this one."
"""What the SDK answers a reply's second and later handoff calls (it takes the first)."""


def reachable(start: SdkAgent[Any], label: str) -> Graph:
    """``start`` and every agent reachable from it by handoff, each once, in the order met."""
    out: list[tuple[SdkAgent[Any], list[tuple[Handoff[Any, Any], SdkAgent[Any]]]]] = []
    seen: set[int] = set()
    todo = [start]
    while todo:
        agent = todo.pop(0)
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        edges: list[tuple[Handoff[Any, Any], SdkAgent[Any]]] = []
        for item in agent.handoffs:
            h = handoff(item) if isinstance(item, SdkAgent) else item
            ref = h._agent_ref  # set by handoff(); the one way to know a handoff's target
            target = ref() if ref is not None else None
            if not isinstance(target, SdkAgent):
                raise UserError(
                    f"Agents SDK agent {label!r}: the handoff {h.tool_name!r} of "
                    f"{agent.name!r} names no agent stead can copy; give handoffs as agents "
                    "or as handoff(agent, ...)"
                )
            edges.append((h, target))
            todo.append(target)
        out.append((agent, edges))
    return out


def journaled_graph(graph: Graph, copy: Callable[[SdkAgent[Any]], SdkAgent[Any]]) -> SdkAgent[Any]:
    """The first agent's copy, each handoff of each copy leading to its target's copy."""
    copies = {id(agent): copy(agent) for agent, _ in graph}
    for agent, edges in graph:
        copies[id(agent)].handoffs = [_to_copy(h, copies[id(t)], copies) for h, t in edges]
    return copies[id(graph[0][0])]


def _to_copy(
    h: Handoff[Any, Any], target: SdkAgent[Any], copies: dict[int, SdkAgent[Any]]
) -> Handoff[Any, Any]:
    invoke = h.on_invoke_handoff

    async def on_invoke(ctx: RunContextWrapper[Any], arguments: str) -> Any:
        # The user's on_handoff and input parsing run as given; the run goes on with the copy.
        got = await invoke(ctx, arguments)
        return copies.get(id(got), got)

    out = dataclasses.replace(h, on_invoke_handoff=on_invoke)
    out._agent_ref = weakref.ref(target)
    return out


def handoff_tools(graph: Graph, function_tools: set[str]) -> list[Tool[..., Any]]:
    """The handoff calls as the run's tools, one per tool name."""
    found: dict[str, tuple[Handoff[Any, Any], SdkAgent[Any]]] = {}
    for agent, edges in graph:
        for h, target in edges:
            name = h.tool_name
            if name in function_tools:
                raise UserError(
                    f"Agents SDK agent {agent.name!r}: its handoff {name!r} has the name of a "
                    "function tool; name them apart"
                )
            known = found.get(name)
            if known is not None and known[1].name != target.name:
                raise UserError(
                    f"Agents SDK agent {agent.name!r}: the handoff {name!r} leads to "
                    f"{target.name!r} here and to {known[1].name!r} elsewhere; name them apart"
                )
            found.setdefault(name, (h, target))
    names = frozenset(found)
    return [_handoff_tool(h, h.get_transfer_message(t), names) for h, t in found.values()]


def _handoff_tool(h: Handoff[Any, Any], message: str, names: frozenset[str]) -> Tool[..., Any]:
    async def perform(values: dict[str, Any], ctx: ToolContext) -> ToolSucceeded:
        journal = current_journal()
        first = None
        if journal is not None:
            first = next(
                (
                    r.tool_call_id
                    for r in journal.requested.values()
                    if r.turn_index == ctx.turn_index and r.name in names
                ),
                None,
            )
        return ToolSucceeded(content=message if first in (None, ctx.tool_call_id) else IGNORED)

    return SchemaTool(
        h.tool_name,
        h.input_json_schema,
        perform,
        description=h.tool_description,
        effect="read_only",
        what=f"the handoff {h.tool_name!r}",
    )
