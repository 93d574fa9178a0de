"""The run state machine: docs/design.md's table, every pair walked, the diagram generated."""

from __future__ import annotations

import itertools

import pytest

from stead.core.states import (
    FINISHED,
    RESUMABLE,
    TRANSITIONS,
    WAITING,
    RunStatus,
    can_transition,
    check_transition,
    mermaid,
)
from stead.errors import IllegalTransition, SteadError

# docs/concepts.md, "The state machine", column "allowed next", written out by hand.
# A change to stead.core.states.TRANSITIONS must be a change to docs/concepts.md, and to this table.
DESIGN_TABLE: dict[str, set[str]] = {
    "queued": {"running", "cancelled"},
    "running": {"awaiting_tool", "awaiting_approval", "completed", "failed", "cancelled"},
    "awaiting_tool": {"running", "awaiting_approval", "failed", "cancelled"},
    "awaiting_approval": {"awaiting_tool", "running", "cancelled", "timed_out"},
    "completed": set(),
    "failed": {"queued"},
    "cancelled": {"queued"},
    "timed_out": {"queued"},
}

ALL_PAIRS = list(itertools.product(RunStatus, RunStatus))


def test_the_eight_states_have_designs_names() -> None:
    assert {s.value for s in RunStatus} == set(DESIGN_TABLE)
    assert len(RunStatus) == 8


def test_transition_table_is_designs_table() -> None:
    actual = {src.value: {dst.value for dst in dsts} for src, dsts in TRANSITIONS.items()}
    assert actual == DESIGN_TABLE


def test_transition_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        TRANSITIONS[RunStatus.COMPLETED] = frozenset({RunStatus.QUEUED})


@pytest.mark.parametrize(("current", "target"), ALL_PAIRS, ids=lambda s: s.value)
def test_every_pair(current: RunStatus, target: RunStatus) -> None:
    if current == target:
        # Staying in a state is not a transition (a tool result leaves the status alone).
        check_transition(current, target)
        assert can_transition(current, target)
    elif target.value in DESIGN_TABLE[current.value]:
        check_transition(current, target)
        assert can_transition(current, target)
    else:
        assert not can_transition(current, target)
        with pytest.raises(IllegalTransition) as info:
            check_transition(current, target, "some_event")
        err = info.value
        assert isinstance(err, SteadError)
        assert (err.current, err.target, err.event) == (current.value, target.value, "some_event")
        message = str(err)
        assert f"{current.value} -> {target.value}" in message
        assert "some_event" in message


def test_completed_is_terminal_and_the_other_ends_only_go_back_to_the_queue() -> None:
    assert TRANSITIONS[RunStatus.COMPLETED] == frozenset()
    for s in (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT):
        assert TRANSITIONS[s] == frozenset({RunStatus.QUEUED})


def test_state_groups() -> None:
    assert {s.value for s in FINISHED} == {"completed", "failed", "cancelled", "timed_out"}
    assert {s.value for s in RESUMABLE} == {"failed", "cancelled", "timed_out"}
    assert {s.value for s in WAITING} == {"awaiting_approval"}
    # Resumable means: the table lets it go back to the queue.
    assert {s for s in RunStatus if RunStatus.QUEUED in TRANSITIONS[s]} == set(RESUMABLE)


def test_mermaid_has_every_edge_and_nothing_else() -> None:
    diagram = mermaid()
    lines = diagram.splitlines()
    assert lines[0] == "stateDiagram-v2"
    assert "    [*] --> queued" in lines
    assert "    completed --> [*]" in lines
    edges = {
        tuple(line.strip().split(" --> "))
        for line in lines[1:]
        if "[*]" not in line and "-->" in line
    }
    expected = {(src, dst) for src, dsts in DESIGN_TABLE.items() for dst in dsts}
    assert edges == expected
    for src, dst in expected:
        assert f"    {src} --> {dst}" in lines


def test_mermaid_is_deterministic() -> None:
    assert mermaid() == mermaid()
