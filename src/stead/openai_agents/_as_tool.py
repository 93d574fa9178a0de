"""An SDK agent used as a tool (``agent.as_tool(...)``) as a durable child run.

The SDK's agent tool runs a nested ``Runner.run`` of its agent inside the call: under stead
that nested run would be an opaque function, its work lost to a crash and its usage outside
the parent's budget. ``durable`` maps each such tool onto ``stead.agent_tool``'s machinery
instead: a call starts a child run of the agent's own ``durable`` copy (created once per call,
its id derived from the call's), the parent rests while the child works, the child's output
is the call's result, its usage counts against the tree's budget, a cancel of the parent
reaches it. On the SDK's side the tool's invocation reads the result the log recorded for the
call, as any function tool's does; the nested ``Runner.run`` is never started.
"""

from __future__ import annotations

import json
from typing import Any

from agents import Agent as SdkAgent
from agents import FunctionTool

from stead.core.events import EffectClass
from stead.errors import UserError
from stead.runtime import Agent, agent_tool
from stead.runtime.agent import ChildTool

_INPUT = "input"
"""The argument the SDK's agent tool takes by default (``AgentAsToolInput``)."""


class AgentAsTool(ChildTool):
    """The stead tool of an SDK agent tool: each call a child run of ``agent``, whose input
    is the model's ``input`` argument (or, for a tool with ``parameters=``, the arguments'
    JSON, as the SDK gives them to its nested run)."""

    def child_input(self, arguments_json: str) -> str:
        try:
            values = json.loads(arguments_json or "{}")
        except ValueError:
            return arguments_json
        text = values.get(_INPUT) if isinstance(values, dict) and len(values) == 1 else None
        return text if isinstance(text, str) and text else arguments_json


def nested_agent(tool: FunctionTool) -> SdkAgent[Any] | None:
    """The agent an ``agent.as_tool(...)`` tool runs, or None for any other function tool."""
    if not getattr(tool, "_is_agent_tool", False):
        return None
    agent = getattr(tool, "_agent_instance", None)
    return agent if isinstance(agent, SdkAgent) else None


def agent_as_tool(
    tool: FunctionTool, child: Agent, what: str, effect: EffectClass | None
) -> AgentAsTool:
    """The stead tool for ``tool`` (an agent tool), its calls child runs of ``child``."""
    if tool.needs_approval is not False:
        raise UserError(
            f"{what}: an agent used as a tool cannot ask for approval under stead; give the "
            "approval to the tools of the agent it runs (needs_approval there), which its "
            "child run asks for"
        )
    # stead.agent_tool checks the options and picks the default class (the strongest among
    # the child agent's tools); the SDK's tool differs only in the argument it reads.
    base = agent_tool(child, name=tool.name, description=tool.description or None, effect=effect)
    return AgentAsTool(
        child, name=base.name, description=base.description, effect=base.effect_class
    )
