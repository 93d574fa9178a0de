"""What a fork carries (pure): the source run's conversation up to the end of a turn.

A fork is a new run whose history is the source's messages through turn ``at_turn``: the
user's input, every reply and every tool result recorded by then, as the source's model read
them. They are history, not work: nothing carried runs again in the fork. A call of that
turn that has no result in the source (in flight, or waiting on a person) is not carried:
its outcome is the source's business, so the fork's history reads an error result for it
instead, and the history stays valid (every call has exactly one result).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stead.core.events import Event
from stead.core.fold import fold
from stead.core.messages import AssistantMessage, Message, ToolResultMessage
from stead.errors import UserError


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkPlan:
    """The history a fork starts from, and what it left behind."""

    history: tuple[Message, ...]
    carried_results: int
    """Tool results carried (recorded in the source; replayed as history)."""
    dropped_calls: tuple[str, ...]
    """Ids of the calls not carried (no result in the source at the fork point)."""


def not_carried(source_run_id: str) -> str:
    """What the fork's model reads for a call that was in flight in the source."""
    return (
        f"This call was not carried into this run: it had no result in run {source_run_id} "
        "when this run was forked from it, and its outcome belongs to that run."
    )


def last_turn(events: Sequence[Event]) -> int:
    """The last turn the log reached (-1: none yet)."""
    turns = [t for e in events if isinstance(t := getattr(e, "turn_index", None), int)]
    return max(turns, default=-1)


def plan_fork(events: Sequence[Event], at_turn: int, source_run_id: str) -> ForkPlan:
    """The fork of a log (``run_created`` with its whole history first) at the end of turn
    ``at_turn``. ``UserError`` for a turn the log never reached."""
    top = last_turn(events)
    if isinstance(at_turn, bool) or not isinstance(at_turn, int) or not 0 <= at_turn <= top:
        reached = f"turns 0 to {top}" if top >= 0 else "no turn yet"
        raise UserError(
            f"run {source_run_id} has {reached}; fork it at one of those (at_turn={at_turn!r}; "
            "at_turn counts from 0, the timeline's turn 1 is at_turn 0)"
        )
    prefix = []
    for e in events:
        turn = getattr(e, "turn_index", None)
        if isinstance(turn, int) and turn > at_turn:
            break
        prefix.append(e)
    messages = list(fold(prefix).conversation())
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    dropped = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            for c in m.tool_calls:
                if c.id not in answered:
                    dropped.append((c.id, c.name))
    carried = len(answered)
    messages += [
        ToolResultMessage(
            tool_call_id=cid, name=name, content=not_carried(source_run_id), is_error=True
        )
        for cid, name in dropped
    ]
    return ForkPlan(
        history=tuple(messages),
        carried_results=carried,
        dropped_calls=tuple(cid for cid, _ in dropped),
    )
