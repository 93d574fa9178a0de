"""A commit ahead of the model call, on PostgreSQL: a tool turn's last result is still on the
wire while the next model call runs (a tool turn waits for one commit, its intent, not two),
and a process killed there leaves what a process killed just before that commit leaves.

Shown without a clock: the result's commit is held by a row lock another connection takes
inside the tool, and the model is called while it is held; released, the run completes with
one result a call. The kills are real (SIGKILL in a child process, ``STEAD_CRASH_AT``), and a
second process finishes the run from the log. ``STEAD_TEST_ALL_MODES=1`` runs them in the
``effects`` mode too.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _crash_harness import KILLED, Scenario
from _scenario import RUN_ID, delivered, side_effects

import stead
from stead.core.canonical import idempotency_key
from stead.core.events import ToolResultRecorded
from stead.core.messages import ToolResultMessage
from stead.providers import ModelRequest
from stead.runtime import OwnedRun
from stead.store.postgres import PostgresStore
from stead.testing import Reply, ScriptedModel, assert_valid_history

pytestmark = pytest.mark.timeout(120)


class RowLock:
    """Another connection's lock on a run's row: an append of that run waits for it."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url)
        self.held = False

    def take(self, run_id: str) -> None:
        self.conn.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (run_id,))
        self.held = True

    def results(self, run_id: str) -> int:
        cur = self.conn.execute(
            "SELECT count(*) FROM events WHERE run_id = %s AND kind = 'tool_result_recorded'",
            (run_id,),
        )
        row = cur.fetchone()
        assert row is not None
        return int(row[0])

    def release(self) -> None:
        self.conn.commit()
        self.held = False


async def test_the_next_model_call_runs_while_the_results_commit_is_on_the_wire(
    pg_url: str,
) -> None:
    lock = RowLock(pg_url)
    seen: dict[str, Any] = {}
    run: dict[str, str] = {}

    @stead.tool(effect="read_only")
    def lookup(order_id: int) -> dict[str, int]:
        """Look up an order; its result's commit then waits for the lock taken here."""
        lock.take(run["id"])
        return {"order_id": order_id}

    def second_call(request: ModelRequest) -> str:
        # The model has the result in its request; the log does not have it yet.
        seen["in_request"] = isinstance(request.messages[-1], ToolResultMessage)
        seen["lock_held"] = lock.held
        seen["results_in_log"] = lock.results(run["id"])
        lock.release()
        return "Order 7 shipped."

    model = ScriptedModel([Reply(tool_calls=[("lookup", {"order_id": 7})]), second_call])
    agent = stead.Agent("ahead", model, [lookup])
    try:
        async with stead.Runtime(pg_url, agents=[agent]) as rt:
            run["id"] = await rt.start(agent, "Where is order 7?")
            view = await asyncio.wait_for(rt.run(run["id"]), 30)
            events = [e.event for e in await rt.store.read_events(run["id"])]
    finally:
        if lock.held:
            lock.release()
        lock.conn.close()
    assert seen == {"in_request": True, "lock_held": True, "results_in_log": 0}
    assert view.status is stead.RunStatus.COMPLETED and view.output == "Order 7 shipped."
    assert sum(isinstance(e, ToolResultRecorded) for e in events) == 1


# -- killed while a commit is ahead ------------------------------------------------------------

ALL_MODES = os.environ.get("STEAD_TEST_ALL_MODES") == "1"
CRASHES = [
    # Killed once lookup_order's result landed, the next model call under way: not run again.
    ("after_result_commit:lookup_order", "strict"),
    # Killed in the model call the result's commit is ahead of: landed or not, either way
    # the run completes with one result a call (a lost read_only result is looked up again).
    ("mid_model_call#2", "strict"),
    # The non_idempotent call's result landed under the last model call: delivered once.
    ("after_result_commit:send_message", "strict"),
]
if ALL_MODES:
    CRASHES += [(c, "effects") for c, _ in CRASHES]


@pytest.fixture
def pg_scenario(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Scenario:
    ledger = str(tmp_path / "ledger.db")
    monkeypatch.setenv("STEAD_TEST_EFFECTS", ledger)  # the parent reads the same ledger
    monkeypatch.delenv("STEAD_CRASH_AT", raising=False)
    return Scenario(store="", ledger=ledger, url=pg_url)


def _final(url: str) -> tuple[Any, list[Any]]:
    async def load() -> tuple[Any, list[Any]]:
        store = PostgresStore(url)
        try:
            state, _ = await OwnedRun.load_state(store, RUN_ID)
            return state, [e.event for e in await store.read_events(RUN_ID)]
        finally:
            await store.close()

    return asyncio.run(load())


@pytest.mark.parametrize(("crash", "mode"), CRASHES)
def test_killed_with_a_commit_ahead_then_resumed(
    pg_scenario: Scenario, monkeypatch: pytest.MonkeyPatch, crash: str, mode: str
) -> None:
    monkeypatch.setenv("STEAD_TEST_DURABILITY", mode)
    first = pg_scenario.run("start", "reconcilable", crash=crash)
    assert first.returncode == KILLED, f"crash point {crash} never fired: {first.stderr}"
    second = pg_scenario.run("run", "reconcilable")
    assert second.returncode == 0, second.stderr
    assert second.out == {"status": "completed", "output": "Told on-call that order 42 shipped."}

    state, events = _final(pg_scenario.url)
    assert_valid_history(state)
    results = Counter(
        (e.turn_index, e.tool_call_id) for e in events if isinstance(e, ToolResultRecorded)
    )
    assert len(results) == 3 and set(results.values()) == {1}
    assert len(delivered(idempotency_key(RUN_ID, "call_1_1"))) == 1 == len(delivered())
    led = side_effects()
    assert set(led.keys("lookup_order")) == {idempotency_key(RUN_ID, "call_0_0")}
    lookups = led.count("lookup_order")
    if "send_message" in crash or (mode, crash) == ("strict", "after_result_commit:lookup_order"):
        assert lookups == 1  # its result was durable before the kill
    elif mode == "effects" and crash == "after_result_commit:lookup_order":
        assert lookups == 2  # a read_only result is held in memory in effects: lost
    else:
        assert lookups in (1, 2)
