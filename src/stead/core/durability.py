"""Which commits must wait for the disk: the durability mode of an agent.

``strict`` (the default) syncs every commit of the run loop, as stead always did: each step is
on disk before the next one starts. ``effects`` makes a step durable only where something
outside the log depends on it; the others are held in memory by the run's session
(``stead.runtime.loop._owned``) and written with the next commit that must be durable, in the
same transaction:

* before a tool that is not ``read_only`` starts: the commit holding its intent (the reply
  and its ``tool_call_requested``), or its ``tool_call_started``;
* when a ``non_idempotent`` call's result is recorded (it must never be asked for again);
* when the run reports a state someone outside waits for: waiting on a person
  (``awaiting_approval``) or finished;
* whatever is not the run loop's own step: recovery verdicts, redispatch records, and a
  failed step's record (``Limits.max_step_failures`` counts them in whichever processes they
  were, and a step whose events cannot be written must not be tried forever).

What a crash of the process takes in ``effects`` mode is the held steps since the last
durable commit (and a crash of the machine, or of the PostgreSQL server, what was written
without a sync): only what is safe to do again, a model reply (the model is asked again) or a
``read_only`` or ``idempotent_write`` result (the tool runs again, with the same idempotency
key).

The decision is pure: the events of the commit and the state after them in, a boolean out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

from stead.core.events import (
    AgentChanged,
    AgentRecorded,
    AssistantMessageRecorded,
    Event,
    LoopDetected,
    ModelCallFailed,
    NoticeInjected,
    RunDeadlineSet,
    RunStarted,
    ToolAttemptFailed,
    ToolCallRequested,
    ToolCallStarted,
    ToolResultRecorded,
    ToolsListed,
    TraceLinked,
    TurnResumed,
    TurnStarted,
)
from stead.core.fold import CallState, RunState
from stead.core.states import AT_REST

Durability = Literal["strict", "effects"]
"""An agent's durability mode (``Agent(durability=...)``)."""

MODES: Final = ("strict", "effects")
"""Every mode, the default first."""

_LOOP_KINDS: Final = frozenset(
    cls.kind
    for cls in (
        RunStarted,
        TurnStarted,
        TurnResumed,
        NoticeInjected,
        ModelCallFailed,
        AssistantMessageRecorded,
        ToolCallRequested,
        ToolCallStarted,
        ToolResultRecorded,
        ToolAttemptFailed,
        LoopDetected,
        RunDeadlineSet,
        ToolsListed,
        TraceLinked,
        # which agent version drives the run: a drive that loses it records it again
        AgentRecorded,
        AgentChanged,
    )
)
"""Kinds a commit may hold and still skip the sync in ``effects`` mode (each is checked
further below). Any other kind (a person's decision, a recovery verdict, a redispatch, an
end of the run) makes the commit synced."""


def must_sync(
    mode: Durability,
    state: RunState,
    events: Sequence[Event],
    earlier: Mapping[str, CallState] | None = None,
) -> bool:
    """Whether a commit of ``events`` must be durable before the run loop goes on (False:
    ``effects`` mode may hold it in memory for the next durable commit).

    ``state`` is the state after them; ``earlier`` the calls of the turn before them, for a
    result whose turn the same commit closes (its ``turn_started`` leaves the call out of
    ``state.calls``)."""
    if mode == "strict" or state.status in AT_REST:
        return True
    calls = state.calls
    for e in events:
        kind = e.kind
        if kind not in _LOOP_KINDS:
            return True
        if kind == "tool_call_requested":
            assert isinstance(e, ToolCallRequested)
            if e.rejection is None and not e.final and e.effect_class != "read_only":
                return True  # the intent of a call with an effect outside the log
        elif kind in ("tool_call_started", "tool_result_recorded"):
            call_id = getattr(e, "tool_call_id", "")
            call = calls.get(call_id) or (earlier or {}).get(call_id)
            if call is None:
                return True  # a call this state does not know: take no chance
            effect = call.effect_class
            if effect == "non_idempotent" or (
                kind == "tool_call_started" and effect != "read_only"
            ):
                return True
    return False
