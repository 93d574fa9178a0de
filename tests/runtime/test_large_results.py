"""Tool results stored by reference (``Limits.result_by_reference``): a long result's text is
stored once by digest beside the log, its event row keeps only what the model is shown;
the model reads it whole, its head, or a handle; export and fork carry it; pruning takes it
when no run names it any more."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

import stead
from stead.core.events import ToolResultRecorded
from stead.core.large_results import reference
from stead.core.messages import ToolResultMessage
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.testing import Reply, ScriptedModel

PAGE = "".join(f"line {i:06d} of the page\n" for i in range(20_000))  # about 480 000 chars


@stead.tool(effect="read_only")
def fetch_page(n: int) -> str:
    """Fetch a long page."""
    return PAGE if n >= 0 else "[stead result sha256:" + "0" * 64 + " 5 chars]\nhello"


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def _seen(request: ModelRequest) -> str:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    return "|".join(f"{len(r.content)}:{r.content[:30]!r}" for r in results)


def _agent(view: Literal["whole", "head", "handle"], calls: int = 2) -> stead.Agent:
    script: list[Reply | object] = [
        Reply(tool_calls=[("fetch_page", {"n": i})]) for i in range(calls)
    ]
    model = ScriptedModel([*script, _seen])  # type: ignore[list-item]
    limits = stead.Limits(result_by_reference=100_000, large_result_view=view, large_result_head=50)
    return stead.Agent(f"reader-{view}", model, [fetch_page], limits=limits)


async def _recorded(rt: stead.Runtime, rid: str) -> list[str]:
    return [
        e.event.content for e in await rt.events(rid) if isinstance(e.event, ToolResultRecorded)
    ]


async def _blob_count(rt: stead.Runtime) -> int:
    async with rt.store._reading() as s:  # type: ignore[attr-defined]
        row = await s.one("SELECT COUNT(*) FROM blobs")
    return int(row[0])


async def test_a_long_result_is_stored_once_and_the_model_reads_it_whole(store: str) -> None:
    agent = _agent("whole")
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "read it twice")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED
        assert view.output is not None
        assert view.output.count(f"{len(PAGE)}:'line 000000 of the page") == 2
        rows = await _recorded(rt, rid)
        assert [len(r) < 200 for r in rows] == [True, True]  # the rows hold a marker
        (handle,) = {reference(r)[0] for r in rows}  # type: ignore[index]
        assert await _blob_count(rt) == 1  # the same text twice: stored once
        assert await rt.stored_result(handle) == PAGE


@pytest.mark.parametrize("view", ["head", "handle"])
async def test_the_model_reads_a_head_or_a_handle(
    store: str, view: Literal["head", "handle"]
) -> None:
    agent = _agent(view, calls=1)
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "read it")
        done = await rt.run(rid)
        assert done.status is RunStatus.COMPLETED
        (row,) = await _recorded(rt, rid)
        ref = reference(row)
        assert ref is not None and ref[1] == len(PAGE)
        assert f"stored as {ref[0]}" in row
        assert ("line 000000" in row) is (view == "head")
        assert done.output is not None and int(done.output.split(":")[0]) == len(row)
        assert await rt.stored_result(ref[0]) == PAGE


async def test_a_small_result_that_looks_like_a_marker_stays_text(store: str) -> None:
    model = ScriptedModel([Reply(tool_calls=[("fetch_page", {"n": -1})]), _seen])
    agent = stead.Agent(
        "mimic", model, [fetch_page], limits=stead.Limits(result_by_reference=100_000)
    )
    async with stead.Runtime(store, agents=[agent]) as rt:
        done = await rt.run(await rt.start(agent, "read"))
        assert done.output is not None and "' [stead result sha256:0000" in done.output
        assert await _blob_count(rt) == 0


async def test_export_and_fork_carry_a_stored_result_and_pruning_takes_it_last(
    store: str, tmp_path: Path
) -> None:
    agent = _agent("whole", calls=1)
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "read it")
        await rt.run(rid)
        exported = tmp_path / "runs.jsonl"
        assert await rt.export(exported, run_ids=[rid]) == 1
        fork = await rt.fork(rid, at_turn=1, input="again")
        (row,) = await _recorded(rt, rid)
        history = (await rt.state(fork.run_id)).messages
        assert [m.content for m in history if isinstance(m, ToolResultMessage)] == [row]
        # pruning the source alone: the fork is kept, so is the source it was made from
        gone = await rt.prune(stead.Retention(keep={"completed": 0, "failed": 0}), apply=True)
        assert rid not in [r for r, _ in gone.runs] and await _blob_count(rt) == 1
        await rt.run(fork.run_id)
        gone = await rt.prune(stead.Retention(keep={"completed": 0, "failed": 0}), apply=True)
        assert {r for r, _ in gone.runs} == {rid, fork.run_id}
        assert await _blob_count(rt) == 0  # no run names it any more
    other = f"sqlite:///{tmp_path / 'other.db'}"
    async with stead.Runtime(other, agents=[agent]) as rt2:
        await rt2.import_runs(exported)
        (row,) = await _recorded(rt2, rid)
        handle = reference(row)
        assert handle is not None and await rt2.stored_result(handle[0]) == PAGE
