"""The run state machine: eight states, and every event that moves a run, in one table.

``TABLE[status][event kind]`` is the status that event leads to. It is the only place a
status change is written down: ``stead.core.fold.apply`` looks every move up here (one choke
point), and the README's diagram and ``docs/states.md`` are generated from it (``mermaid()``,
``markdown()``), so neither the code nor the pictures can drift from it. As h11 does for HTTP,
the table is data, not code spread over handlers.

Rules of the table (docs/states.md):

* A run is born ``queued`` by ``run_created`` (``BIRTH``). An event the table does not list
  for the run's status (and that is not in ``STAYS``) is refused with ``IllegalTransition``
  before a byte is written.
* ``completed`` is terminal. ``failed``, ``cancelled`` and ``timed_out`` are terminal for a
  worker but may be sent back to ``queued`` by an explicit resume (``run_requeued``).
* An entry may lead back to the same status (``turn_started`` while ``running``): the event
  is legal there and the status stays. Events in ``STAYS`` never change the status (a tool
  result, a notice); their own checks live with their handlers in ``fold.py``.
* Two events move only sometimes (``CONDITIONAL``): where they move is in the table, whether
  they move is decided by their handler from the event and the state.
"""

from __future__ import annotations

from collections.abc import Mapping
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

BIRTH: Final = ("run_created", S.QUEUED)
"""The one event that makes a run, and the status it is born in."""

# What every event of a worker's turn does while a run is live (running, awaiting a tool or
# a person): the three live statuses share these rows but for their exits.
_TURN: Final = {
    "turn_started": S.RUNNING,
    "turn_resumed": S.AWAITING_TOOL,
    "tool_call_requested": S.AWAITING_TOOL,
    "approval_requested": S.AWAITING_APPROVAL,
    "approval_decided": S.AWAITING_TOOL,
    "run_cancelled": S.CANCELLED,
}
_RESUME: Final = {"run_requeued": S.QUEUED}
_ENDS: Final = {"run_failed": S.FAILED, "run_timed_out": S.TIMED_OUT}
"""A worker's run ends failed, or past its deadline (``Limits.max_duration``)."""

TABLE: Final[Mapping[RunStatus, Mapping[str, RunStatus]]] = MappingProxyType(
    {
        s: MappingProxyType(row)
        for s, row in {
            S.QUEUED: {"run_started": S.RUNNING, "run_cancelled": S.CANCELLED},
            S.RUNNING: {**_TURN, "run_completed": S.COMPLETED, **_ENDS},
            S.AWAITING_TOOL: {"run_started": S.RUNNING, **_TURN, **_ENDS},
            S.AWAITING_APPROVAL: {"run_started": S.RUNNING, **_TURN, "run_timed_out": S.TIMED_OUT},
            S.COMPLETED: {},
            S.FAILED: _RESUME,
            S.CANCELLED: _RESUME,
            S.TIMED_OUT: _RESUME,
        }.items()
    }
)
"""status -> {event kind -> next status}: every move of a run, and only those."""

CONDITIONAL: Final[Mapping[str, str]] = MappingProxyType(
    {
        "tool_call_requested": "unless the call is refused, or is the final result, on arrival",
        "approval_decided": "when it decides the last pending approval",
    }
)
"""Events that move the run only sometimes (their handler says when), and when."""

STAYS: Final = frozenset(
    {
        "run_recovered",
        "notice_injected",
        "model_call_failed",
        "assistant_message",
        "loop_detected",
        "tool_call_started",
        "tool_result_recorded",
        "tool_attempt_failed",
        "tool_outcome_unknown",
        "tool_call_deferred",
        "tool_reconciled",
        "run_cancel_requested",
        "step_failed",
        "effect_reconciled",
        "redispatch",
        "run_deadline_set",
        "tools_listed",
        "trace_linked",
        "run_forked",
        "agent_recorded",
        "agent_changed",
    }
)
"""Events that never change a run's status (legal in any status their handler accepts)."""

TRANSITIONS: Final[Mapping[RunStatus, frozenset[RunStatus]]] = MappingProxyType(
    {s: frozenset(t for t in row.values() if t != s) for s, row in TABLE.items()}
)
"""status -> the other statuses some event may move it to (``TABLE`` without the events)."""

FINISHED: Final = frozenset({S.COMPLETED, S.FAILED, S.CANCELLED, S.TIMED_OUT})
"""States in which no worker acts on the run (only an explicit resume moves it again)."""

RESUMABLE: Final = frozenset(s for s in FINISHED if "run_requeued" in TABLE[s])
"""Finished states an explicit resume may send back to ``queued``."""

AT_REST: Final = FINISHED | {S.AWAITING_APPROVAL}
"""States in which no worker has anything to do: finished, or waiting on a person (a
deadline may still time such a run out)."""

CLAIMABLE: Final = frozenset(RunStatus) - AT_REST
"""States a worker may claim: waiting for one, or left behind by one (its lease lapsed or
was released). Finished runs and runs waiting on a person are never claimed."""

AWAITING: Final = frozenset({S.AWAITING_TOOL, S.AWAITING_APPROVAL})
"""States in which the current turn's tool calls are open (being run or waiting on a person)."""

FAILABLE: Final = frozenset(s for s, row in TABLE.items() if "run_failed" in row)
"""States from which a run may be failed (``run_failed``)."""


def can_transition(current: RunStatus, target: RunStatus) -> bool:
    """True when some event moves ``current`` to ``target`` (or it is no change at all)."""
    return current == target or target in TRANSITIONS[current]


def check_transition(current: RunStatus, target: RunStatus, event: str = "") -> None:
    """Raise ``IllegalTransition`` unless ``current -> target`` is legal."""
    if not can_transition(current, target):
        raise IllegalTransition(current.value, target.value, event)


def targets(kind: str) -> frozenset[RunStatus]:
    """Every status the event ``kind`` may lead to (empty for one that never moves a run)."""
    found = {row[kind] for row in TABLE.values() if kind in row}
    if kind == BIRTH[0]:
        found.add(BIRTH[1])
    return frozenset(found)


def _edges() -> dict[tuple[str, str], list[str]]:
    """(from, to) -> the events that take that edge, in table order; moves only."""
    edges: dict[tuple[str, str], list[str]] = {("[*]", BIRTH[1].value): [BIRTH[0]]}
    for src, row in TABLE.items():
        for kind, dst in row.items():
            if dst != src:
                edges.setdefault((src.value, dst.value), []).append(kind)
    return edges


def mermaid() -> str:
    """The state diagram in Mermaid syntax, generated from ``TABLE``, each edge labelled with
    the events that take it (an event that leaves the status as it is draws no edge)."""
    lines = ["stateDiagram-v2"]
    for (src, dst), kinds in _edges().items():
        lines.append(f"    {src} --> {dst}: {', '.join(kinds)}")
    lines.append(f"    {S.COMPLETED.value} --> [*]")
    return "\n".join(lines)


def markdown() -> str:
    """``docs/states.md``: the whole table as Markdown (status, event, next status), then the
    events that never move a run. Generated; a test says the file is current."""
    rows = [("(none)", f"`{BIRTH[0]}`", BIRTH[1].value, "")]
    for src, row in TABLE.items():
        if not row:
            rows.append((src.value, "(none: terminal)", "", ""))
        for kind, dst in row.items():
            same = " (stays)" if dst == src else ""
            rows.append((src.value, f"`{kind}`", dst.value + same, CONDITIONAL.get(kind, "")))
    return "\n".join(
        [
            "# Run states",
            "",
            "Generated from `stead.core.states.TABLE` by `stead.core.states.markdown()`; do not",
            "edit by hand (`STEAD_UPDATE_STATES=1 pytest tests/core/test_states.py` rewrites it).",
            "An event not listed for a run's status is refused with `IllegalTransition` and",
            "nothing is written. How to add an event: [adding-an-event.md](adding-an-event.md).",
            "",
            "| status | event | next status | when |",
            "| --- | --- | --- | --- |",
            *(f"| {' | '.join(r)} |".replace("|  |", "| |") for r in rows),
            "",
            "Events that never change the status (their handler in `stead/core/handlers.py` says",
            "in which states they are legal):",
            "",
            *(f"- `{kind}`" for kind in sorted(STAYS)),
            "",
        ]
    )
