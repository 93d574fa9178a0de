"""Agents of other frameworks as stead runs: the layer an integration builds on.

An integration (``stead.pydantic_ai``) turns its framework's agent into a ``stead.Agent``
with ``foreign_agent``: the agent's model is a ``ForeignModel`` and each of its tools a
``foreign_tool``, both of which hand their work to the drive's ``Journal``; the foreign agent
itself runs (``Launch``) beside the run loop and routes its model requests
(``Journal.model``), tool calls (``Journal.tool``, ``Journal.rejected``) and approvals
(``Journal.decision``) through the same journal, which it finds with ``current_journal``.
The run loop decides and records everything, as for a native agent; the foreign agent reads
back only what the log recorded. See ``stead/foreign/_journal.py`` for the protocol.
"""

from __future__ import annotations

from typing import Any

from stead.core.builders import EndRetry
from stead.core.durability import Durability
from stead.core.effects import ToolFailed, ToolOutcome
from stead.core.events import EffectClass
from stead.core.limits import Budget, Limits
from stead.core.messages import Message, Usage
from stead.core.pricing import PriceTable
from stead.foreign._journal import (
    Journal,
    JournalObserver,
    Launch,
    Rejected,
    current_journal,
    current_progress,
    current_tool_context,
    drive_journal,
)
from stead.providers import ModelCall, ModelResponse
from stead.runtime import Agent
from stead.runtime.agent import Ended
from stead.tools import ApprovalPolicy, Reconciler, SchemaTool, Tool, ToolContext

__all__ = [
    "ForeignModel",
    "Journal",
    "Launch",
    "Rejected",
    "current_journal",
    "current_progress",
    "current_tool_context",
    "foreign_agent",
    "foreign_tool",
]


class ForeignModel:
    """The model of a foreign agent's ``stead.Agent``: each call performs the model request
    the foreign agent made for that turn (``Journal.perform_model``)."""

    def __init__(self, model_name: str) -> None:
        self._model_name = model_name

    @property
    def model_name(self) -> str:
        return self._model_name

    async def complete(self, call: ModelCall) -> ModelResponse:
        journal = drive_journal()
        response: ModelResponse = await journal.perform_model(
            call.request.turn_index, call.on_progress
        )
        return response


def foreign_tool(
    name: str,
    parameters: dict[str, Any],
    *,
    description: str = "",
    effect: EffectClass = "non_idempotent",
    reconcile: Reconciler | None = None,
    requires_approval: bool | ApprovalPolicy = False,
    timeout: float | None = None,
    retries: int = 0,
    what: str = "",
    source: object | None = None,
) -> Tool[..., Any]:
    """A foreign agent's tool as a stead tool: run, recovered and replayed by the run loop
    by its effect class; each attempt performs the call the foreign agent makes.

    ``source``: where a listed tool came from (an object with a ``name`` and a
    ``definitions()`` of every tool it listed, as ``stead.mcp.MCPTools`` has), so each run
    records that listing (``tools_listed``) whenever it changed."""

    async def perform(values: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        found = await drive_journal().perform_tool(ctx)
        if isinstance(found, Rejected):
            return ToolFailed(failure=found.message)
        outcome: ToolOutcome = found
        return outcome

    made = SchemaTool if source is None else _Sourced
    tool = made(
        name,
        parameters,
        perform,
        description=description,
        effect=effect,
        reconcile=reconcile,
        requires_approval=requires_approval,
        timeout=timeout,
        retries=retries,
        what=what,
    )
    if isinstance(tool, _Sourced):
        tool.listed_by = source
    return tool


class _Sourced(SchemaTool):
    """A foreign tool that a source listed (``Tool.source``)."""

    listed_by: object = None

    @property
    def source(self) -> Any:
        return self.listed_by


def foreign_agent(
    name: str,
    model_name: str,
    tools: list[Tool[..., Any]],
    launch: Launch,
    *,
    output_type: Any = None,
    limits: Limits | None = None,
    budget: Budget | None = None,
    prices: PriceTable | None = None,
    deps_type: type[Any] | None = None,
    durability: Durability = "strict",
    checks_end: bool = False,
) -> Agent:
    """The ``stead.Agent`` standing for a foreign agent: its runs are driven by stead's run
    loop, in step with the foreign agent ``launch`` runs (once per drive, from the start).

    ``checks_end``: the foreign agent checks its own final answer (Pydantic AI's output
    validators): before a reply that would end the run is recorded, the agent reads it and
    either finishes, its run's result (what ``launch`` returns) being the output, or asks the
    model again, which is recorded as a refused answer the model reads."""
    agent = Agent(
        name,
        ForeignModel(model_name),
        tools,
        limits=limits,
        budget=budget,
        prices=prices,
        output_type=output_type,
        deps_type=deps_type,
        durability=durability,
    )
    agent.observer = JournalObserver(launch)
    if checks_end:
        agent.end_check = _end_check
    return agent


async def _end_check(turn: int, message: Message, usage: Usage, model: str) -> Ended | EndRetry:
    """``Agent.end_check`` of a foreign agent that checks its own answer: asks the drive's
    journal (``Journal.end_check``)."""
    return await drive_journal().end_check(turn, message, usage, model)
