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
from stead.core.messages import (
    AssistantMessage,
    Attachment,
    Message,
    NoticeMessage,
    ToolResultMessage,
    UserMessage,
    message_from_json,
)
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


class TurnNotReached(UserError):
    """A fork at a turn the source run never reached; ``last`` is its last turn (from 0;
    -1: none), so a face that numbers turns otherwise can say it in its own numbers."""

    def __init__(self, message: str, *, run_id: str, last: int) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.last = last


def plan_fork(events: Sequence[Event], at_turn: int, source_run_id: str) -> ForkPlan:
    """The fork of a log (``run_created`` with its whole history first) at the end of turn
    ``at_turn``. ``TurnNotReached`` for a turn the log never reached."""
    top = last_turn(events)
    if isinstance(at_turn, bool) or not isinstance(at_turn, int) or not 0 <= at_turn <= top:
        reached = f"turns 0 to {top}" if top >= 0 else "no turn yet"
        raise TurnNotReached(
            f"run {source_run_id} has {reached}; fork it at one of those (at_turn={at_turn!r}; "
            "at_turn counts from 0, the timeline's turn 1 is at_turn 0)",
            run_id=source_run_id,
            last=top,
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkStart:
    """How a fork begins after its carried history: more history, then its input."""

    history: tuple[Message, ...]
    """The carried history, then every given message but the last."""
    input: str
    """The last given message's text: the user message the fork's first turn answers."""
    attachments: tuple[Attachment, ...]
    """The last given message's attachments."""


def start_with(plan: ForkPlan, messages: Sequence[object]) -> ForkStart:
    """A fork that goes on with ``messages`` (not one new input): each a ``UserMessage``,
    ``AssistantMessage``, ``ToolResultMessage`` or ``NoticeMessage`` (a ``str`` is a user
    message), the last a user message. The history stays valid: a tool result answers a
    call of an earlier assistant message that has no result yet, and every call has its
    result before the last message. ``UserError`` naming the message otherwise."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise UserError(
            "fork(messages=...) takes a list of messages (the last a user message), "
            f"not {type(messages).__name__}"
        )
    if not messages:
        raise UserError("fork(messages=...) is empty: give at least the user message to answer")
    given: list[Message] = []
    for i, m in enumerate(messages):
        if isinstance(m, str):
            m = UserMessage(content=m)
        if not isinstance(m, UserMessage | AssistantMessage | ToolResultMessage | NoticeMessage):
            raise UserError(
                f"fork messages[{i}] is a {type(m).__name__}: give a stead message "
                "(UserMessage, AssistantMessage, ToolResultMessage, NoticeMessage) or a str"
            )
        given.append(m)
    last = given[-1]
    if not isinstance(last, UserMessage):
        raise UserError(
            f"fork messages[{len(given) - 1}] is a {last.role} message: the last must be a "
            "user message (what the fork's first turn answers)"
        )
    open_calls: dict[str, str] = {}
    seen: set[str] = set()
    for i, m in enumerate(given):
        if isinstance(m, AssistantMessage):
            for c in m.tool_calls:
                if c.id in seen or _called_in(plan.history, c.id):
                    raise UserError(f"fork messages[{i}] repeats tool call id {c.id!r}")
                seen.add(c.id)
                open_calls[c.id] = c.name
        elif isinstance(m, ToolResultMessage):
            if m.tool_call_id not in open_calls:
                raise UserError(
                    f"fork messages[{i}] answers call {m.tool_call_id!r}, which no earlier "
                    "assistant message of the fork asks for (or which is answered already)"
                )
            del open_calls[m.tool_call_id]
        elif open_calls:
            raise UserError(
                f"fork messages[{i}] comes before the results of calls "
                f"{sorted(open_calls)}: every call needs its result first"
            )
    return ForkStart(
        history=plan.history + tuple(given[:-1]),
        input=last.content,
        attachments=last.attachments,
    )


def _called_in(history: Sequence[Message], call_id: str) -> bool:
    """Whether ``history`` already holds a call with this id (every carried call has its
    result, so a repeat of its id would make two calls one)."""
    return any(
        isinstance(m, AssistantMessage) and any(c.id == call_id for c in m.tool_calls)
        for m in history
    )


def decode_messages(data: object) -> list[Message]:
    """Fork messages from JSON (a list of messages as the export format writes them: each
    an object with its ``role``); ``UserError`` naming the message that does not decode."""
    if not isinstance(data, list):
        raise UserError(f"fork messages are a JSON list of messages, not {type(data).__name__}")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise UserError(f"fork messages[{i}] is {type(item).__name__}, not a message object")
        try:
            out.append(message_from_json(item))
        except (ValueError, TypeError, KeyError) as exc:
            raise UserError(f"fork messages[{i}] is not a message: {exc}") from None
    return out
