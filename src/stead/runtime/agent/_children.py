"""``stead.agent_tool``: another agent used as a tool, each call a durable child run.

The tool's handler never runs in a worker: the run loop sees the spec's ``child`` flag and
starts (or finds) the call's child run itself (``stead.runtime.loop``), so the child is a run
of its own (states, timeline, recovery, any worker) rather than an opaque function call.
"""

from __future__ import annotations

from typing import Any

from stead.core.decide import ToolSpec
from stead.core.effects import ToolFailed, ToolSucceeded
from stead.core.events import EffectClass
from stead.errors import UserError
from stead.runtime.agent._agent import Agent
from stead.tools import SchemaTool, ToolContext

_STRENGTH: dict[str, int] = {"read_only": 0, "idempotent_write": 1, "non_idempotent": 2}

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the agent should do, in full."}},
    "required": ["task"],
}


def strongest_effect(agent: Agent) -> EffectClass:
    """The effect class of the agent's most consequential tool (``read_only`` for none):
    what starting a run of it may do, at most."""
    classes = [t.effect_class for t in agent.registry]
    return max(classes, key=_STRENGTH.__getitem__, default="read_only")


async def _not_here(values: dict[str, Any], ctx: ToolContext) -> ToolSucceeded | ToolFailed:
    """Reached only where a call of the tool is handed to an executor instead of the run
    loop (a pool that was given the tool by name): an error the model reads."""
    del values, ctx
    return ToolFailed(
        failure="this tool starts a child run, which only the run's own worker can do"
    )


class ChildTool(SchemaTool):
    """A tool whose every call is a child run of ``agent`` (see ``agent_tool``)."""

    def __init__(
        self,
        agent: Agent,
        *,
        name: str,
        description: str,
        effect: EffectClass,
    ) -> None:
        super().__init__(
            name, _PARAMETERS, _not_here, description=description, effect=effect, what=""
        )
        self.agent = agent
        """The agent each call runs (the worker registers it with the parent's)."""

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(effect_class=self._effect, asks=True, child=True)

    def child_input(self, arguments_json: str) -> str:
        """The child's input: the task the model wrote."""
        task = self._values(arguments_json).get("task")
        return task if isinstance(task, str) and task else arguments_json

    def __repr__(self) -> str:
        return f"<ChildTool {self._name!r} -> agent {self.agent.name!r}>"


def agent_tool(
    agent: Agent,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: EffectClass | None = None,
) -> ChildTool:
    """A tool that hands a task to ``agent``: each call starts a child run of it with the
    model's ``task`` as its input, waits for it durably (the parent rests and its worker is
    free meanwhile), and the child's output (its structured output's JSON when it has an
    ``output_type``) is the call's result. A child that fails, is cancelled or times out is
    an error result the parent's model reads.

    ``name`` defaults to the agent's name, ``description`` to a line naming it; ``effect``
    (the class recorded for the call, and in the child's link) defaults to the strongest
    class among ``agent``'s tools. The child is created once per call, also across
    crashes: its id is derived from the call's.
    """
    if not isinstance(agent, Agent):
        raise UserError(f"agent_tool takes a stead.Agent, not {type(agent).__name__}")
    if effect is not None and effect not in _STRENGTH:
        raise UserError(f"agent_tool: effect must be one of {', '.join(_STRENGTH)}, not {effect!r}")
    if description is not None and not isinstance(description, str):
        raise UserError("agent_tool: description takes text")
    return ChildTool(
        agent,
        name=name or agent.name,
        description=description or f"Hand a task to the {agent.name} agent; it replies when done.",
        effect=effect or strongest_effect(agent),
    )
