"""What a fork carries (``stead.core.fork``): the source's conversation through a turn, an
error result for each call left in flight, and a refusal for a turn the run never reached."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stead.core.events import (
    AssistantMessageRecorded,
    RunCreated,
    RunStarted,
    ToolCallRequested,
    ToolResultRecorded,
    TurnStarted,
)
from stead.core.fork import ForkPlan, last_turn, plan_fork, start_with
from stead.core.messages import AssistantMessage, ToolCall, ToolResultMessage, Usage, UserMessage
from stead.errors import UserError


def turn(n: int, calls: list[str], results: list[str], text: str = "") -> list[object]:
    msg = AssistantMessage(
        text=text,
        tool_calls=tuple(ToolCall(id=c, name="lookup", arguments="{}") for c in calls),
        stop_reason="tool_use" if calls else "end_turn",
    )
    out: list[object] = [
        TurnStarted(turn_index=n),
        AssistantMessageRecorded(turn_index=n, message=msg, usage=Usage()),
    ]
    out += [
        ToolCallRequested(
            turn_index=n,
            tool_call_id=c,
            name="lookup",
            arguments="{}",
            effect_class="read_only",
            idempotency_key="k" + c,
        )
        for c in calls
    ]
    out += [
        ToolResultRecorded(turn_index=n, tool_call_id=c, name="lookup", content=f"result {c}")
        for c in results
    ]
    return out


LOG = [
    RunCreated(run_id="src", agent="a", input="go"),
    RunStarted(owner="w", epoch=1),
    *turn(0, ["c1", "c2"], ["c2", "c1"]),
    *turn(1, ["c3", "c4"], ["c3"]),  # c4 in flight
]


def test_a_fork_at_a_finished_turn_carries_its_results_in_the_calls_order() -> None:
    p = plan_fork(LOG, 0, "src")  # type: ignore[arg-type]
    assert p.carried_results == 2 and p.dropped_calls == ()
    assert isinstance(p.history[0], UserMessage) and p.history[0].content == "go"
    results = [m.tool_call_id for m in p.history if isinstance(m, ToolResultMessage)]
    assert results == ["c1", "c2"]  # the order a model reads, not the order they finished


def test_a_call_in_flight_at_the_fork_turn_is_not_carried() -> None:
    p = plan_fork(LOG, 1, "src")  # type: ignore[arg-type]
    assert p.carried_results == 3 and p.dropped_calls == ("c4",)
    last = p.history[-1]
    assert isinstance(last, ToolResultMessage) and last.is_error and "src" in last.content
    # every call of the history has exactly one result
    calls = [c.id for m in p.history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [m.tool_call_id for m in p.history if isinstance(m, ToolResultMessage)]
    assert sorted(calls) == sorted(answered)


@pytest.mark.parametrize("at", [-1, 2, True, 1.0])
def test_a_turn_the_run_never_reached_is_refused(at: object) -> None:
    assert last_turn(LOG) == 1  # type: ignore[arg-type]
    with pytest.raises(UserError, match="turns 0 to 1"):
        plan_fork(LOG, at, "src")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="no turn yet"):
        plan_fork(LOG[:2], 0, "src")  # type: ignore[arg-type]


_CALL_IDS = st.sampled_from(["a", "b", "c"])
_GIVEN = st.lists(
    st.one_of(
        st.builds(
            lambda ids: AssistantMessage(
                tool_calls=tuple(ToolCall(id=i, name="lookup", arguments="{}") for i in ids),
                stop_reason="tool_use",
            ),
            st.lists(_CALL_IDS, max_size=2),
        ),
        st.builds(
            lambda i: ToolResultMessage(tool_call_id=i, name="lookup", content="r"),
            _CALL_IDS,
        ),
        st.builds(lambda t: UserMessage(content=t), st.text(max_size=3)),
        st.text(max_size=3),
    ),
    max_size=6,
)


@given(_GIVEN)
def test_given_messages_are_taken_only_when_every_call_keeps_exactly_one_result(
    given: list[object],
) -> None:
    """Whatever is given, ``start_with`` refuses it or returns a history in which every call
    has exactly one result, no id is called twice, and no result answers nothing."""
    plan = ForkPlan(history=(UserMessage(content="x"),), carried_results=0, dropped_calls=())
    try:
        start = start_with(plan, given)
    except UserError:
        return
    assert isinstance(given[-1], UserMessage | str)
    called: list[str] = []
    answered: list[str] = []
    for m in start.history:
        if isinstance(m, AssistantMessage):
            assert set(called) == set(answered), "a reply before every call had its result"
            called += [c.id for c in m.tool_calls]
        elif isinstance(m, ToolResultMessage):
            answered.append(m.tool_call_id)
    assert len(called) == len(set(called)) and sorted(called) == sorted(answered)
