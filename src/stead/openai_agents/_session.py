"""``SteadSession``: the SDK's ``Session`` for a stead run, its history read from the log.

A stead conversation is a sequence of runs, one per user message (``Runtime.send``), each
created with the whole conversation before it in its ``run_created``. The SDK keeps the same
thing in a ``Session`` it reads before a run (``get_items``) and appends to after
(``add_items``). Under stead the log is the only writer: the SDK's ``Runner`` is given a
``SteadSession`` holding the run's history, and what it adds lives in this drive only, since
the run loop has already recorded every model reply and tool result of the run. A follow-up
message reads them back from the log, in any process, after any crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents.items import TResponseInputItem
from agents.memory import SessionABC

from stead.core.messages import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    UserMessage,
)


class SteadSession(SessionABC):
    """The SDK session of one stead run: its conversation so far, from the run's log.

    ``durable(...)`` runs give the SDK's ``Runner`` one of these (``Runner.run(...,
    session=...)``); items the SDK adds stay in the drive, as the log records the run itself.
    """

    def __init__(self, session_id: str, history: Iterable[Message] = ()) -> None:
        self.session_id = session_id
        self.session_settings = None
        self._items: list[TResponseInputItem] = items_of(history)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        items = list(self._items)
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        self._items.extend(items)

    async def pop_item(self) -> TResponseInputItem | None:
        return self._items.pop() if self._items else None

    async def clear_session(self) -> None:
        self._items.clear()


def items_of(history: Iterable[Message]) -> list[TResponseInputItem]:
    """Stead's messages as the SDK's input items: user and assistant text, each function
    call and its output under its call id (notices, to one run alone, are left out)."""
    out: list[Any] = []
    for m in history:
        if isinstance(m, UserMessage):
            out.append({"role": "user", "content": m.content})
        elif isinstance(m, AssistantMessage):
            if m.text:
                out.append({"role": "assistant", "content": m.text})
            for c in m.tool_calls:
                out.append(
                    {
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": c.arguments or "{}",
                    }
                )
        elif isinstance(m, ToolResultMessage):
            out.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}
            )
    return out
