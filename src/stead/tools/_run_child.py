"""``ToolContext.run_child``: the seam between a tool's handler and the run loop that owns
its call (the loop's side is ``stead.runtime.loop``).

A handler that starts a child run cannot wait for it inside one attempt: the child may
take hours, and a crash must not start it twice. So ``run_child`` either returns the
result of the child already recorded under the call (its id derived from the call and the
child's place among those the handler started), or stops the handler (``ChildPending``)
and leaves a note for the loop, which starts the child, records that the call waits on it
and lets the run rest. The child's end runs the handler again from its top, and this
time ``run_child`` returns.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol


class ChildPending(Exception):
    """Raised by ``run_child`` when the child has not finished: the call waits on it and
    its handler runs again when it ends. Let it through (the loop acts on its note even
    when a handler swallows it, but the handler's result is then discarded)."""


class ChildPort(Protocol):
    """What ``ToolContext.run_child`` asks of the run loop driving the call."""

    run_id: str

    async def run_child(self, ctx: Any, agent: Any, input: str) -> Any:
        """``ctx``: the calling handler's ``ToolContext`` (Any here: that module imports
        this one)."""
        ...


CHILD_PORT: ContextVar[ChildPort | None] = ContextVar("stead_child_port", default=None)
"""The port of the drive a handler runs in (set for the drive's task and the tasks it
starts; unset in an executor pool's process, where a handler cannot start children)."""
