"""A pool's keys against its tasks, on both stores: what the ledger says it holds and what it
really runs must agree, or a key waits for a holder that will never settle it.

- A task that ends after the pool began a newer one for the same key (its own claim took
  the key over once its lease lapsed) forgets its own entry only (``Pool._drop``).

The pool runs in this process (``Pool.run`` as a task on its own store connection), so these
tests are quick.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from _pool_scenario import QUEUE

import stead
from stead.core.effects import Assignment, AssignmentKey, ToolBody, assignment_to_json
from stead.runtime import Pool
from stead.store import open_store
from stead.store._ledger import Claimed, Ledger, ledger_for
from stead.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STEAD_TEST_LEDGER", str(tmp_path / "effects.db"))
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
async def ledger(url: str) -> AsyncIterator[Ledger]:
    store = open_store(url)
    led = ledger_for(store, poll_interval=0.05)
    yield led
    await led.close()
    await store.close()


@stead.tool(effect="read_only", queue=QUEUE)
async def hang(ctx: stead.ToolContext) -> str:
    """Wait until told to stop."""
    reason = await ctx.signal.wait()
    raise stead.Aborted(reason)


class pool_running:
    """A ``Pool`` serving ``QUEUE`` as a task of this loop, on its own store connection."""

    def __init__(self, url: str, tools: list[Any], **options: Any) -> None:
        a = stead.Agent("strays", ScriptedModel(["x"]), tools=tools)
        self.pool = Pool(url, [a], queues=[QUEUE], poll_interval=0.02, **options)

    async def __aenter__(self) -> Pool:
        self.task = asyncio.ensure_future(self.pool.run())
        await until(lambda: self.pool.ledger.serves(QUEUE, now=time.time()))
        return self.pool

    async def __aexit__(self, *exc: object) -> None:
        self.pool.stop()
        self.pool.stop()
        await self.task
        await self.pool.close()


async def until(check: Callable[[], Awaitable[bool] | bool], timeout: float = 20.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def job(effect_id: str, tool: str, effect_class: str = "read_only") -> Assignment:
    return Assignment(
        key=AssignmentKey(session_id="s", run_id="r1", effect_id=effect_id),
        body=ToolBody(
            tool_name=tool, definition_digest="", arguments="{}", effect_class=effect_class,
            replay_policy="rerun", tool_call_id="c", turn_index=0, idempotency_key="k",
            attempt=1,
        ),
    )  # fmt: skip


async def kinds(ledger: Ledger, effect_id: str) -> list[str]:
    return [e.kind for e in await ledger.history(effect_id)]


async def test_an_ending_task_forgets_only_its_own_entry(url: str) -> None:
    """The key's entry is a newer task's by the time the old task ends (the pool claimed the
    key again meanwhile: its lease had lapsed and its own claim took the key over; the new
    task shares the in-process call and outlives the old one by its settle): the old task's
    end must not forget the new one, or the pool no longer hears the run's cancel for it,
    counts a slot free that is not, and takes the key for one it holds with no task."""
    pool = Pool(url, [stead.Agent("strays", ScriptedModel(["x"]), tools=[hang])], queues=[QUEUE])
    try:
        a = assignment_to_json(job("e1", "hang"))
        pool._start(Claimed("e1", 1, {}, False, QUEUE))  # ends at once: undecodable
        first = pool._running["e1"][0]
        pool._start(Claimed("e1", 3, a, True, QUEUE, started=True))  # waits for its signal
        task, sig, c = pool._running["e1"]
        await asyncio.wait_for(first, 10)
        await asyncio.sleep(0.01)  # its done callbacks ran
        assert "e1" in pool._running and pool._running["e1"][0] is task and c.epoch == 3
        sig.abort("the test is over")
        await asyncio.wait_for(task, 10)
        assert "e1" not in pool._running
    finally:
        await pool.close()
