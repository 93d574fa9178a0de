"""A model reply's commit: the admissions of its calls and the events that record it.

The events are built by a callable the handle calls with the state at the append (and again
after a concurrent write). It was a closure: nine cells, a function and its tuple of cells for
every model turn, each living across the append (a group commit, with a thousand runs in
flight) for the cyclic garbage collector to walk. ``ReplyIntent`` is one object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stead.core.builders import CallAdmission, Consent, reply_events
from stead.core.events import Event

if TYPE_CHECKING:
    from stead.core.fold import RunState
    from stead.core.limits import Limits
    from stead.core.messages import AssistantMessage, Usage
    from stead.runtime.agent import Agent, Judged


def admissions(agent: Agent, message: AssistantMessage) -> dict[str, CallAdmission]:
    """Each call of the reply admitted by the agent's tools (``ToolRegistry.admit``), and
    marked for approval where its tool's policy asks for one."""
    out: dict[str, CallAdmission] = {}
    registry, approvals = agent.registry, agent._parts.approvals
    for call in message.tool_calls:
        v = registry.admit(call)
        tool = registry.get(call.name) if approvals and v.rejection is None else None
        if tool is not None and tool.needs_approval(v.arguments):
            v = CallAdmission(
                tool_call_id=v.tool_call_id,
                arguments=v.arguments,
                effect_class=v.effect_class,
                rejection=None,
                needs_approval=True,
            )
        out[call.id] = v
    return out


class ReplyIntent:
    """The events of one reply's commit (``reply_events`` and the judge's settlement), from
    the state it is appended onto; ``built`` is what the last call built."""

    __slots__ = ("built", "consent", "eager", "judged", "limits", "model", "settings", "usage")

    def __init__(
        self,
        judged: Judged,
        usage: Usage,
        model: str,
        limits: Limits,
        consent: Consent | None,
        eager: list[str],
        settings: dict[str, Any] | None,
    ) -> None:
        self.judged, self.usage, self.model, self.limits = judged, usage, model, limits
        self.consent, self.eager, self.settings = consent, eager, settings
        self.built: list[Event] = []

    def __call__(self, st: RunState) -> list[Event]:
        judged = self.judged
        built = self.built = reply_events(
            st,
            judged.turn_index,
            judged.message,
            self.usage,
            self.model,
            judged.admissions,
            self.limits,
            self.consent,
            start_now=self.eager,
            settings=self.settings,
        )
        built.extend(judged.settle(st, self.usage, self.limits))
        return built
