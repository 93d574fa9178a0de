"""Agent versions at a drive's start: what the run's policy makes of the version its log
recorded (``stead.core.versions`` decides; the fingerprint is ``Agent.fingerprint``)."""

from __future__ import annotations

from typing import Any

from stead.core.builders import run_failed_event, started_run_event, version_event
from stead.core.events import Event
from stead.core.states import FAILABLE, RunStatus
from stead.core.versions import (
    CHANGED,
    TOOL_CHANGED,
    OpenCall,
    broken_calls,
    changed_message,
    verdict,
)
from stead.runtime.agent import Agent
from stead.runtime.loop._owned import OwnedRun
from stead.store.lifecycle import pin


async def settle_version(session: OwnedRun, agent: Agent, owner: str, epoch: int) -> bool:
    """Apply the agent's version policy before a drive: False when this process must leave
    the run (pinned to another version, or just failed); True to drive it. What it records
    (the first version, a change) rides with the drive's first commit, not one of its own."""
    state = session.state
    mine = agent.fingerprint
    what = verdict(state.agent_fingerprint, mine, agent.on_change)
    if what == "leave":
        await pin(session.store, state.run_id, state.agent_fingerprint)
        return False
    problems = []
    if what == "fail":
        labels = (state.agent_version, agent.version or "")
        problems.append(
            (CHANGED, changed_message(agent.name, state.agent_fingerprint, mine, labels))
        )
    open_calls = [
        OpenCall(tool_call_id=c.tool_call_id, name=c.name, arguments=c.arguments)
        for c in state.pending_calls()
        if c.rejection is None
    ]
    # A fresh run (most drives) has no call to check: no checker is built for it.
    broken = (
        broken_calls(open_calls, {t.name: _checker(t) for t in agent.registry})
        if open_calls
        else []
    )
    if broken and not problems:
        problems.append((TOOL_CHANGED, "; ".join(broken)))
    if problems:
        code, message = problems[0]
        if state.status not in FAILABLE and state.status is not RunStatus.QUEUED:
            return False  # at rest: a person's decision comes first, then this again
        events: list[Event] = []
        if state.status is RunStatus.QUEUED:
            events.append(started_run_event(owner, epoch))
        events.append(run_failed_event(state, code, "runtime", message))
        await session.append(events, automatic=False)
        return False
    if what == "record" and agent.on_change == "pin":
        await pin(session.store, state.run_id, mine)
    if what in ("record", "changed"):
        session.prefix.append(version_event(state, mine, agent.version or ""))
    return True


def _checker(tool: Any) -> Any:
    def check(arguments: str) -> str | None:
        message: str | None = tool.validate(arguments)[1]
        return message

    return check
