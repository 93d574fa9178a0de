"""Guarantee 2 in the database: one result per (run, turn_index, tool_call_id).

The core refuses a second result when it folds; these tests bypass the fold on purpose (a
buggy or racing writer with a correct sequence number) and show the store refuses anyway.
"""

from __future__ import annotations

import pytest
from _builders import T0, RunBuilder, call_id, result, seeded

from stead.core.events import ToolResultRecorded
from stead.errors import Conflict
from stead.store import Store

pytestmark = pytest.mark.timeout(30)


async def open_call(store: Store, run_id: str = "run-1") -> RunBuilder:
    """A run in awaiting_tool whose turn 0 call has no result yet."""
    b = RunBuilder(run_id)
    await b.create(store)
    b.start()
    b.tool_turn(calls=1, results=False)
    await b.flush(store)
    return b


SECOND_RESULTS = {
    "same_content": ToolResultRecorded(
        turn_index=0, tool_call_id=call_id(0, 0), name="lookup", content="first"
    ),
    "other_content": ToolResultRecorded(
        turn_index=0, tool_call_id=call_id(0, 0), name="lookup", content="second", attempt=2
    ),
    "synthetic_cancel": ToolResultRecorded(
        turn_index=0,
        tool_call_id=call_id(0, 0),
        name="lookup",
        content="cancelled",
        is_error=True,
        source="cancelled",
    ),
}


@pytest.mark.parametrize("second", list(SECOND_RESULTS))
async def test_a_second_result_for_the_same_call_is_refused(store: Store, second: str) -> None:
    b = await open_call(store)
    first = result(0, call_id(0, 0), content="first")
    seq = await store.append(
        "run-1", [first], expected_seq=b.written, epoch=0, status="awaiting_tool", now=T0
    )
    before = await store.read_events("run-1")

    with pytest.raises(Conflict, match="run-1"):
        await store.append(
            "run-1",
            [SECOND_RESULTS[second]],
            expected_seq=seq,
            epoch=0,
            status="awaiting_tool",
            now=T0 + 1,
        )
    assert await store.read_events("run-1") == before
    rec = await store.get_run("run-1")
    assert (rec.last_seq, rec.updated_at) == (seq, T0)


async def test_duplicates_inside_one_batch_refuse_the_whole_batch(store: Store) -> None:
    b = await open_call(store)
    before = await store.read_events("run-1")
    batch = [result(0, call_id(0, 0), content="a"), result(0, call_id(0, 0), content="b")]
    with pytest.raises(Conflict):
        await store.append(
            "run-1", batch, expected_seq=b.written, epoch=0, status="awaiting_tool", now=T0
        )
    assert await store.read_events("run-1") == before  # not even the first of the two
    assert (await store.get_run("run-1")).last_seq == b.written


async def test_the_same_call_id_in_another_turn_or_run_is_a_different_call(store: Store) -> None:
    # Some providers restart ids like call_0 every turn; uniqueness is per turn.
    reused = call_id(0, 0)
    b = await seeded(store, "run-1", turns=1)
    b.tool_turn(ids=[reused])
    assert await b.flush(store) == len(b.log)

    other = await open_call(store, "run-2")
    assert (
        await store.append(
            "run-2",
            [result(0, reused)],
            expected_seq=other.written,
            epoch=0,
            status="awaiting_tool",
            now=T0,
        )
        == other.written + 1
    )

    results = [
        (s.event.turn_index, s.event.tool_call_id)
        for s in await store.read_events("run-1")
        if isinstance(s.event, ToolResultRecorded)
    ]
    assert results == [(0, reused), (1, reused)]
