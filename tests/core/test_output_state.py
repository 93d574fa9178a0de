"""A completed run's structured output in the folded state and its snapshot (v4), and the
accepted final result's request, which leaves the run where it is (no new move)."""

from __future__ import annotations

import json

from stead.core.events import (
    AssistantMessageRecorded,
    RunCompleted,
    RunCreated,
    RunStarted,
    ToolCallRequested,
    ToolResultRecorded,
    TurnStarted,
)
from stead.core.fold import STATE_VERSION, RunState, fold
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.core.states import RunStatus

CALL = ToolCall(id="c1", name="final_result", arguments='{"city":"Paris"}')
LOG = [
    RunCreated(run_id="r", agent="a", input="q"),
    RunStarted(owner="w", epoch=1),
    TurnStarted(turn_index=0),
    AssistantMessageRecorded(
        turn_index=0,
        message=AssistantMessage(text="", tool_calls=(CALL,), stop_reason="tool_use"),
        usage=Usage(input_tokens=3),
        settings={"temperature": 0.2},
    ),
    ToolCallRequested(
        turn_index=0,
        tool_call_id="c1",
        name="final_result",
        arguments='{"city":"Paris"}',
        effect_class="read_only",
        idempotency_key="k",
        final=True,
    ),
    ToolResultRecorded(turn_index=0, tool_call_id="c1", name="final_result", content="ok"),
    RunCompleted(output='{"city":"Paris"}', stop_reason="final_result", data={"city": "Paris"}),
]


def test_an_accepted_final_result_completes_from_running_and_keeps_its_value() -> None:
    before = fold(LOG[:5])
    assert before.status is RunStatus.RUNNING  # the final result is not awaited
    state = fold(LOG)
    assert state.status is RunStatus.COMPLETED
    assert state.data == {"city": "Paris"}


def test_the_snapshot_keeps_the_value_and_a_v3_one_reads_as_none() -> None:
    state = fold(LOG)
    snap = json.loads(json.dumps(state.to_json()))
    assert snap["v"] == STATE_VERSION == 6
    assert RunState.from_json(snap).data == {"city": "Paris"}
    old = {k: v for k, v in snap.items() if k != "data"} | {"v": 3}
    assert RunState.from_json(old).data is None
