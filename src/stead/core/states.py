"""The run state machine: eight states and every legal transition, as one table.

Rules of the table (docs/design.md, "The run state machine"):

* A run is born ``queued``. Only the transitions listed here exist; anything else is a bug
  and is refused with ``IllegalTransition`` before a byte is written.
* ``completed`` is terminal. ``failed``, ``cancelled`` and ``timed_out`` are terminal for a
  worker but may be sent back to ``queued`` by an explicit resume.
* Staying in the same state is not a transition (many events, such as a tool result, leave
  the status unchanged); the table lists only real changes.

The documentation's state diagram is generated from ``TRANSITIONS`` (``mermaid()``), so the
picture cannot drift from the code.
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType
from typing import Final

from stead.errors import IllegalTransition


class RunStatus(StrEnum):
    """Where a run is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_TOOL = "awaiting_tool"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


S = RunStatus

TRANSITIONS: Final = MappingProxyType(
    {
        S.QUEUED: frozenset({S.RUNNING, S.CANCELLED}),
        S.RUNNING: frozenset(
            {S.AWAITING_TOOL, S.AWAITING_APPROVAL, S.COMPLETED, S.FAILED, S.CANCELLED}
        ),
        S.AWAITING_TOOL: frozenset({S.RUNNING, S.AWAITING_APPROVAL, S.FAILED, S.CANCELLED}),
        S.AWAITING_APPROVAL: frozenset({S.AWAITING_TOOL, S.RUNNING, S.CANCELLED, S.TIMED_OUT}),
        S.COMPLETED: frozenset(),
        S.FAILED: frozenset({S.QUEUED}),
        S.CANCELLED: frozenset({S.QUEUED}),
        S.TIMED_OUT: frozenset({S.QUEUED}),
    }
)
"""state -> the states it may move to."""

FINISHED: Final = frozenset({S.COMPLETED, S.FAILED, S.CANCELLED, S.TIMED_OUT})
"""States in which no worker acts on the run (only an explicit resume moves it again)."""

RESUMABLE: Final = frozenset({S.FAILED, S.CANCELLED, S.TIMED_OUT})
"""Finished states an explicit resume may send back to ``queued``."""

WAITING: Final = frozenset({S.AWAITING_APPROVAL})
"""States in which the run waits for a person, not a worker."""


def can_transition(current: RunStatus, target: RunStatus) -> bool:
    """True when ``current -> target`` is in the table (or is no change at all)."""
    return current == target or target in TRANSITIONS[current]


def check_transition(current: RunStatus, target: RunStatus, event: str = "") -> None:
    """Raise ``IllegalTransition`` unless ``current -> target`` is legal."""
    if not can_transition(current, target):
        raise IllegalTransition(current.value, target.value, event)


def mermaid() -> str:
    """The state diagram in Mermaid syntax, generated from ``TRANSITIONS``."""
    lines = ["stateDiagram-v2", "    [*] --> queued"]
    for src, targets in TRANSITIONS.items():
        for dst in sorted(targets):
            lines.append(f"    {src.value} --> {dst.value}")
    lines.append("    completed --> [*]")
    return "\n".join(lines)
