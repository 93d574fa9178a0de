"""Child runs, the pure decisions (``stead.core.children``): ids, links, and what a
finished child gives the call that waits on it, for both kinds of wait (an ``agent_tool``
call, a handler's ``run_child``) and every way a child ends."""

from __future__ import annotations

from typing import Any

from core_strategies import AWAITING_TWO, RUN_ID, start
from hypothesis import given
from hypothesis import strategies as st

from stead.core.children import (
    Link,
    child_run_id,
    child_settled_events,
    child_wait_events,
    link_of,
)
from stead.core.decide import ToolSpec, plan_call
from stead.core.events import (
    ApprovalDecided,
    Event,
    RunCancelled,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunStarted,
    RunTimedOut,
    ToolResultRecorded,
)
from stead.core.fold import RunState, fold
from stead.core.states import RunStatus

ids = st.text(alphabet="abcdefghij_0123456789", min_size=1, max_size=12)
indexes = st.none() | st.integers(min_value=0, max_value=5)


@given(st.lists(st.tuples(ids, ids, indexes), min_size=2, max_size=12, unique=True))
def test_every_call_and_place_has_its_own_child_id(keys: list[tuple[str, str, int | None]]) -> None:
    made = [child_run_id(*k) for k in keys]
    assert len(set(made)) == len(made)
    assert made == [child_run_id(*k) for k in keys]  # the same in every process


@given(ids, ids, st.integers(0, 9), indexes)
def test_a_link_reads_back_as_written(run: str, call: str, depth: int, index: int | None) -> None:
    link = Link(
        run_id=run, tool_call_id=call, depth=depth, root=run, effect="read_only", index=index
    )
    assert link_of({"parent": link.to_json()}) == link


def _child(link: Link, end: Event | None) -> RunState:
    created = RunCreated(
        run_id=child_run_id(link.run_id, link.tool_call_id, link.index),
        agent="helper",
        input="do it",
        config={"parent": link.to_json()},
    )
    events: list[Event] = [created, RunStarted(owner="w", epoch=1)]
    return fold([*events, end] if end is not None else events)


ENDS: dict[str, Event | None] = {
    "running": None,
    "completed": RunCompleted(output="the answer"),
    "failed": RunFailed(code="budget_exceeded", phase="model", message="too dear"),
    "cancelled": RunCancelled(reason="stop"),
    "timed_out": RunTimedOut(reason="deadline"),
}


@given(
    st.sampled_from(sorted(ENDS)),
    indexes,
    st.booleans(),
    st.sampled_from(["read_only", "non_idempotent"]),
)
def test_a_finished_child_ends_its_parents_wait_once(
    end: str, index: int | None, waiting: bool, effect: Any
) -> None:
    """An ``agent_tool`` wait takes the child's result (``source="child"``, an error unless
    it completed); a handler's wait (``index``) takes ``approve``, so the handler runs
    again; nothing while the child works, or when the parent waits on no child; applied
    twice, the second time writes nothing."""
    log = list(AWAITING_TWO)
    if effect == "non_idempotent":
        log.append(start(0, "a"))
    parent = fold(log)
    link = Link(run_id=RUN_ID, tool_call_id="a", depth=1, root=RUN_ID, index=index)
    child = _child(link, ENDS[end])
    if waiting:
        call = parent.calls["a"]
        parent = fold([*log, *child_wait_events(call, child.run_id, "helper", "do it", "t", index)])
        assert parent.status is RunStatus.AWAITING_APPROVAL
    settled = child_settled_events(parent, child)
    if end == "running" or not waiting:
        assert settled == []
        return
    after = fold(
        [
            *log,
            *child_wait_events(parent.calls["a"], child.run_id, "helper", "do it", "t", index),
            *settled,
        ]
    )
    assert child_settled_events(after, child) == []  # a repeated delivery writes nothing
    if index is None:
        decided, recorded = settled
        assert isinstance(decided, ApprovalDecided) and isinstance(recorded, ToolResultRecorded)
        assert recorded.source == "child" and recorded.is_error is (end != "completed")
        assert after.calls["a"].result is not None
    else:
        (decided,) = settled
        assert isinstance(decided, ApprovalDecided) and decided.decision == "approve"
        assert after.calls["a"].result is None  # the handler's next run records it
        plan = plan_call(after.calls["a"], ToolSpec(effect_class=effect))
        assert plan.action == "execute"  # run again, whatever its class: not a crash
