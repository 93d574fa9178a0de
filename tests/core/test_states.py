"""The run state machine: the design's table, every pair walked, every event in the table,
the diagram and docs/states.md generated from it."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import pytest
from core_strategies import RunLog, run_logs
from hypothesis import given, settings

from stead.core import states
from stead.core.events import EVENT_TYPES
from stead.core.fold import HANDLERS, RunState, apply
from stead.core.states import (
    AT_REST,
    AWAITING,
    BIRTH,
    CLAIMABLE,
    CONDITIONAL,
    FAILABLE,
    FINISHED,
    RESUMABLE,
    STAYS,
    TABLE,
    TRANSITIONS,
    RunStatus,
    can_transition,
    check_transition,
    markdown,
    mermaid,
    targets,
)
from stead.errors import IllegalTransition, SteadError

ROOT = Path(__file__).resolve().parents[2]
UPDATE = os.environ.get("STEAD_UPDATE_STATES") == "1"

# docs/concepts.md, "The state machine", column "allowed next", written out by hand.
# A change to stead.core.states.TRANSITIONS must be a change to docs/concepts.md, and to this table.
DESIGN_TABLE: dict[str, set[str]] = {
    "queued": {"running", "cancelled"},
    "running": {
        "awaiting_tool",
        "awaiting_approval",
        "completed",
        "failed",
        "cancelled",
        "timed_out",
    },
    "awaiting_tool": {"running", "awaiting_approval", "failed", "cancelled", "timed_out"},
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
    assert {s.value for s in AT_REST - FINISHED} == {"awaiting_approval"}
    assert not hasattr(states, "WAITING"), "a named set nothing uses"
    # Resumable means: the table lets it go back to the queue.
    assert {s for s in RunStatus if RunStatus.QUEUED in TRANSITIONS[s]} == set(RESUMABLE)


def test_named_sets() -> None:
    assert {s.value for s in CLAIMABLE} == {"queued", "running", "awaiting_tool"}
    assert set(RunStatus) == CLAIMABLE | AT_REST and not CLAIMABLE & AT_REST
    assert {s.value for s in AWAITING} == {"awaiting_tool", "awaiting_approval"}
    assert {s.value for s in FAILABLE} == {"running", "awaiting_tool"}


# -- every event kind, in the table ------------------------------------------------------------

MOVING = {kind for row in TABLE.values() for kind in row}


def test_every_event_kind_has_a_handler_and_a_place_in_the_table() -> None:
    # The "adding an event" recipe (docs/adding-an-event.md): a class, a handler, its place
    # in the table. A kind missing either fails here, before any run meets it.
    for kind in EVENT_TYPES:
        assert kind in HANDLERS, f"{kind} has no handler in stead.core.handlers"
        placed = (kind == BIRTH[0]) + (kind in MOVING) + (kind in STAYS)
        assert placed == 1, f"{kind} must be in exactly one of TABLE, STAYS, BIRTH"
    assert set(HANDLERS) == set(EVENT_TYPES)
    assert MOVING | STAYS | {BIRTH[0]} == set(EVENT_TYPES)
    assert set(CONDITIONAL) <= MOVING


def test_every_moving_event_has_one_target() -> None:
    # One target per event keeps the diagram readable and the handlers simple: an event says
    # *whether* it moves, the table says where from.
    for kind in MOVING | {BIRTH[0]}:
        assert len(targets(kind)) == 1, kind
    for kind in STAYS:
        assert targets(kind) == frozenset()


def test_the_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        TABLE[RunStatus.COMPLETED] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        TABLE[RunStatus.FAILED]["run_started"] = RunStatus.RUNNING  # type: ignore[index]


@settings(max_examples=60, deadline=None)
@given(run_logs())
def test_every_status_change_of_a_generated_log_is_in_the_table(log: RunLog) -> None:
    state = RunState()
    for e in log.events:
        before = state.status
        apply(state, e)
        assert state.status is not None
        if before is None:
            assert (e.kind, state.status) == BIRTH
        elif e.kind in STAYS:
            assert state.status is before, e.kind
        elif state.status is not before or e.kind not in CONDITIONAL:
            assert TABLE[before][e.kind] is state.status, (before, e.kind)


# -- the generated documents ---------------------------------------------------------------------


def _block(text: str) -> str:
    (block,) = re.findall(r"```mermaid\n(.*?)```", text, re.S)
    return str(block)


def test_mermaid_has_every_move_and_nothing_else() -> None:
    lines = mermaid().splitlines()
    assert lines[0] == "stateDiagram-v2"
    assert "    [*] --> queued: run_created" in lines
    assert lines[-1] == "    completed --> [*]"
    edges: dict[tuple[str, str], set[str]] = {}
    for line in lines[1:-1]:
        m = re.fullmatch(r"    (\S+) --> (\S+): (.+)", line)
        assert m, line
        edges[(m[1], m[2])] = set(m[3].split(", "))
    expected: dict[tuple[str, str], set[str]] = {("[*]", "queued"): {"run_created"}}
    for src, row in TABLE.items():
        for kind, dst in row.items():
            if dst != src:
                expected.setdefault((src.value, dst.value), set()).add(kind)
    assert edges == expected
    # The edges are the design's table.
    assert {(a, b) for a, b in edges if a != "[*]"} == {
        (a, b) for a, bs in DESIGN_TABLE.items() for b in bs
    }


def test_mermaid_is_deterministic() -> None:
    assert mermaid() == mermaid()


def test_markdown_lists_every_entry() -> None:
    text = markdown()
    for src, row in TABLE.items():
        for kind, dst in row.items():
            assert re.search(rf"\| {src.value} \| `{kind}` \| {dst.value}\b", text), (src, kind)
    for kind in STAYS:
        assert f"- `{kind}`" in text


def _current(path: Path, now: str, generated: str) -> None:
    if UPDATE and now != generated:
        path.write_text(path.read_text().replace(now, generated) if now else generated)
        return
    assert now == generated, (
        f"{path.relative_to(ROOT)} is not what stead.core.states generates; "
        "STEAD_UPDATE_STATES=1 pytest tests/core/test_states.py rewrites it"
    )


def test_docs_states_md_is_generated_from_the_table() -> None:
    path = ROOT / "docs" / "states.md"
    _current(path, path.read_text() if path.exists() else "", markdown())


def test_readme_diagram_is_generated_from_the_table() -> None:
    path = ROOT / "README.md"
    _current(path, _block(path.read_text()).strip(), mermaid().strip())
