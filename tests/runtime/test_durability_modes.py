"""The ``effects`` durability mode in a real run: which commits wait for the disk, counted.

A SQLite store's connection is traced (``set_trace_callback``, the seam): a write transaction's
COMMIT fsyncs the WAL unless the store set ``synchronous=NORMAL`` for it. Counts, never
times. What the mode keeps under a SIGKILL is shown by ``test_crash.py`` in both modes. The
last test drives twelve runs of one process at once, in both modes and on both stores: their
appends share batches (group commit) and every history stays valid.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import stead
from stead.runtime import OwnedRun
from stead.testing import Reply, ScriptedModel, SQLiteCommits, assert_valid_history

pytestmark = pytest.mark.timeout(60)

TURNS = 4


async def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped"}


def agent(effect: str, durability: str) -> stead.Agent:
    model = ScriptedModel(
        [Reply(tool_calls=[("lookup", {"order_id": i})]) for i in range(TURNS)] + ["Shipped."]
    )
    tool = stead.tool(effect=effect, name="lookup")(lookup)  # type: ignore[call-overload]
    return stead.Agent(f"a-{effect}-{durability}", model, [tool], durability=durability)  # type: ignore[arg-type]


def fresh(where: Path) -> Path:
    """A store file in a new folder ``where``."""
    where.mkdir()
    return where / "runs.db"


async def counted(where: Path, effect: str, durability: str) -> SQLiteCommits:
    """Commits of one run of TURNS tool turns of ``effect`` (after its creation)."""
    a = agent(effect, durability)
    async with stead.Runtime(f"sqlite:///{fresh(where)}", agents=[a]) as rt:
        rid = await rt.start(a, "Check the orders.")  # run_created: synced in every mode
        commits = SQLiteCommits(rt.store)
        view = await rt.run(rid)
        assert view.status is stead.RunStatus.COMPLETED
        kinds = [e.event.kind for e in await rt.events(rid)]
        assert kinds.count("tool_result_recorded") == TURNS
    return commits


async def test_strict_syncs_every_step(tmp_path: Path) -> None:
    commits = await counted(tmp_path / "strict", "read_only", "strict")
    # The claim, run_started and the release ride unsynced (they always did); every other
    # commit waits for the disk: each reply with its intent, each result, the end.
    assert commits.commits - commits.fsyncs == 3
    assert commits.fsyncs == 2 * TURNS + 1


async def test_effects_writes_read_only_work_once_at_the_end(tmp_path: Path) -> None:
    commits = await counted(tmp_path / "effects", "read_only", "effects")
    # Every step is held in memory and written with run_completed, the state someone waits
    # for: one transaction, one fsync; the claim and the release around it, unsynced.
    assert commits.commits == 3
    assert commits.fsyncs == 1


async def test_effects_syncs_the_intent_of_a_tool_with_an_effect(tmp_path: Path) -> None:
    commits = await counted(tmp_path / "idem", "idempotent_write", "effects")
    assert commits.fsyncs == TURNS + 1  # each intent, and the end; not the results
    assert commits.commits == TURNS + 3  # a result rides with the next intent's commit
    commits = await counted(tmp_path / "non", "non_idempotent", "effects")
    # Without a reconcile function the start record is a commit of its own: the intent, the
    # start and the result of each call, and the end.
    assert commits.fsyncs == 3 * TURNS + 1


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(stead.UserError, match="durability takes one of 'strict', 'effects'"):
        agent("read_only", "fast")


async def _many(url: str, durability: str) -> tuple[stead.Runtime, list[str]]:
    """Twelve runs of one Runtime driven at once, half with a non_idempotent tool."""

    async def send(order_id: int) -> dict[str, Any]:
        """Send a note about an order."""
        return {"sent": order_id}

    agents = [agent("read_only", durability)]
    model = ScriptedModel(
        [Reply(tool_calls=[("send", {"order_id": i})]) for i in range(TURNS)] + ["Sent."]
    )
    sender = stead.tool(effect="non_idempotent", name="send")(send)
    agents.append(stead.Agent(f"s-{durability}", model, [sender], durability=durability))  # type: ignore[arg-type]
    rt = stead.Runtime(url, agents=agents)
    ids = [await rt.start(agents[i % 2], "Go.") for i in range(12)]
    views = await asyncio.gather(*(rt.run(rid) for rid in ids))
    assert {v.status for v in views} == {stead.RunStatus.COMPLETED}
    return rt, ids


@pytest.mark.parametrize("durability", ["strict", "effects"])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_many_runs_of_one_process_share_commits_and_keep_valid_histories(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, durability: str
) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgres" else ""
    rt, ids = await _many(url or f"sqlite:///{tmp_path / 'runs.db'}", durability)
    try:
        assert rt.store.group.batches > 0  # type: ignore[attr-defined]
        for rid in ids:
            state, _ = await OwnedRun.load_state(rt.store, rid)
            assert_valid_history(state)
            sends = [e.event for e in await rt.events(rid) if e.event.kind == "tool_call_started"]
            assert len(sends) == (TURNS if ids.index(rid) % 2 else 0)  # each send once
    finally:
        await rt.close()
