"""``core.durability.must_sync``: which commits of the ``effects`` mode wait for the disk."""

from __future__ import annotations

from stead.core.builders import step_failed_event
from stead.core.durability import MODES, must_sync
from stead.core.events import (
    ApprovalRequested,
    AssistantMessageRecorded,
    Event,
    RunCompleted,
    ToolCallRequested,
    ToolCallStarted,
    ToolResultRecorded,
    TurnStarted,
)
from stead.core.fold import CallState, RunState
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.core.states import RunStatus


def requested(call_id: str, effect: str | None, **kw: object) -> ToolCallRequested:
    return ToolCallRequested(
        turn_index=0,
        tool_call_id=call_id,
        name="t",
        arguments="{}",
        effect_class=effect,  # type: ignore[arg-type]
        idempotency_key="k",
        **kw,  # type: ignore[arg-type]
    )


def state(status: RunStatus, **classes: str) -> RunState:
    """A state in ``status`` whose open calls have the given effect classes."""
    st = RunState(run_id="r")
    st.status = status
    for call_id, effect in classes.items():
        e = requested(call_id, effect)
        st.calls[call_id] = CallState(
            turn_index=0,
            tool_call_id=call_id,
            name=e.name,
            arguments=e.arguments,
            effect_class=e.effect_class,
            idempotency_key=e.idempotency_key,
        )
    return st


def reply(*calls: str) -> AssistantMessageRecorded:
    message = AssistantMessage(
        text="", tool_calls=tuple(ToolCall(id=c, name="t", arguments="{}") for c in calls)
    )
    return AssistantMessageRecorded(turn_index=0, message=message, usage=Usage())


def result(call_id: str) -> ToolResultRecorded:
    return ToolResultRecorded(turn_index=0, tool_call_id=call_id, name="t", content="ok")


AWAITING = RunStatus.AWAITING_TOOL
RUNNING = RunStatus.RUNNING


def effects(st: RunState, *events: Event) -> bool:
    return must_sync("effects", st, list(events))


def test_strict_syncs_every_commit() -> None:
    assert MODES[0] == "strict"
    assert must_sync("strict", state(RUNNING), [TurnStarted(turn_index=0)])
    assert must_sync("strict", state(AWAITING, a="read_only"), [result("a")])


def test_a_reply_and_read_only_calls_ride_with_the_next_synced_commit() -> None:
    st = state(AWAITING, a="read_only")
    assert not effects(st, reply("a"), requested("a", "read_only"))
    assert not effects(state(RUNNING), TurnStarted(turn_index=1))
    assert not effects(state(RUNNING, a="read_only"), result("a"), TurnStarted(turn_index=1))


def test_the_intent_of_a_call_with_an_effect_is_synced() -> None:
    for effect in ("idempotent_write", "non_idempotent"):
        st = state(AWAITING, a="read_only", b=effect)
        assert effects(st, reply("a", "b"), requested("a", "read_only"), requested("b", effect))
        start = ToolCallStarted(turn_index=0, tool_call_id="b", attempt=1, effect_id="e")
        assert effects(st, start)
    # A refused call, an unknown tool's and the final answer run nothing.
    st = state(AWAITING, a="idempotent_write")
    assert not effects(st, requested("a", "idempotent_write", rejection="bad arguments"))
    assert not effects(st, requested("a", "idempotent_write", final=True))


def test_only_a_non_idempotent_result_is_synced() -> None:
    assert not effects(state(RUNNING, a="idempotent_write"), result("a"))
    assert effects(state(RUNNING, a="non_idempotent"), result("a"))
    assert effects(state(RUNNING), result("gone"))  # a call the state does not know: sync


def test_a_waiting_or_final_state_is_synced() -> None:
    asked = ApprovalRequested(
        turn_index=0,
        tool_call_id="a",
        reason="policy",
        payload={},
        token="t",
    )
    assert effects(state(RunStatus.AWAITING_APPROVAL, a="read_only"), asked)
    done = RunCompleted(output="ok", stop_reason="end_turn")
    for status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED):
        assert effects(state(status), done)


def test_a_result_whose_commit_opens_the_next_turn_is_judged_by_its_own_call() -> None:
    """The result's commit carries the next ``turn_started``, which replaces the turn's
    calls: the call is looked up in the calls from before the commit."""
    before = state(AWAITING, a="read_only", b="non_idempotent").calls
    after = state(RUNNING)  # the new turn: no calls yet
    assert not must_sync("effects", after, [result("a"), TurnStarted(turn_index=1)], before)
    assert must_sync("effects", after, [result("b"), TurnStarted(turn_index=1)], before)


def test_a_failed_step_is_synced() -> None:
    """``max_step_failures`` counts failures in whichever processes they were: a record held
    in memory and lost would start the count again, and a step whose events cannot be written
    would be tried forever."""
    failed = step_failed_event("model", RuntimeError("boom"))
    assert effects(state(RUNNING), failed)
