"""A zombie worker on PostgreSQL: frozen past its lease, overtaken, woken, and refused.

Worker A (a ``stead worker`` process, 1 s lease) performs a tool call's effect and is frozen
with SIGSTOP before it can record the result. Its lease lapses; worker B (another process)
claims the run, bumping the fencing epoch, settles the call by its effect class and finishes
the run. A is then woken with SIGCONT, still believing it owns the run: every write it tries
is refused (``Fenced``), the log does not change, and the history holds each call's result
once.

* ``notify_slowly`` (non_idempotent, reconcilable): B asks the message service, finds the
  message A sent and records it. The message was sent exactly once.
* ``lookup_slowly`` (read_only): B runs it again, as its class allows. It ran twice; its
  result is recorded once.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from _crash_harness import Scenario
from _scenario import delivered, side_effects
from _workers import WorkerProc

from _wait import until_async
from stead.core.canonical import idempotency_key
from stead.core.events import RunRecovered, ToolResultRecorded
from stead.runtime import Runtime
from stead.store import open_store
from stead.testing import assert_valid_history

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("tool", ["notify_slowly", "lookup_slowly"])
async def test_a_worker_woken_after_its_lease_lapsed_cannot_write(
    pg_url: str, scenario: Scenario, tmp_path: Path, tool: str
) -> None:
    import _fleet

    agent = _fleet.zombie(tool)
    store = open_store(pg_url)
    workers: list[WorkerProc] = []
    try:
        async with Runtime(store, agents=[agent]) as rt:
            run_id = await rt.start(agent, "Tell on-call about order 7")
            a = WorkerProc(
                pg_url, tmp_path / "a.log", "--lease-ttl", "1", "--poll", "0.1",
                env={"STEAD_TEST_SLOW": "4"},
            )  # fmt: skip
            workers.append(a)

            async def a_did_the_effect() -> bool:
                return side_effects().count(tool) == 1

            await until_async(a_did_the_effect, f"worker A to perform {tool}", every=0.01)
            a.signal(signal.SIGSTOP)
            frozen = await store.get_run(run_id)
            assert frozen.lease_owner is not None and frozen.status == "awaiting_tool"
            assert frozen.epoch == 1

            async def lease_lapsed() -> bool:
                return ((await store.get_run(run_id)).lease_expires_at or 0) < time.time()

            await until_async(lease_lapsed, "A's lease to lapse")
            b = WorkerProc(
                pg_url, tmp_path / "b.log", "--lease-ttl", "30", "--poll", "0.1",
                env={"STEAD_TEST_SLOW": "0"},
            )  # fmt: skip
            workers.append(b)

            async def b_finished() -> bool:
                return (await store.get_run(run_id)).status == "completed"

            await until_async(b_finished, "worker B to take the run over and finish it")
            done = await store.get_run(run_id)
            assert done.epoch == 2
            log_before = await store.read_events(run_id)

            a.signal(signal.SIGCONT)  # A's tool returns; A tries to record its result

            async def a_refused() -> bool:
                return "fenced" in a.text()

            await until_async(a_refused, "A to be refused")
            assert await asyncio.to_thread(a.stop) == 0, a.text()
            assert await asyncio.to_thread(b.stop) == 0, b.text()

            # Nothing A tried after waking landed.
            after = await store.get_run(run_id)
            assert (after.last_seq, after.epoch) == (done.last_seq, 2)
            assert await store.read_events(run_id) == log_before
            assert f"run {run_id} fenced" in a.text()
            assert "fenced=1" in a.text() and "completed=1" in b.text()

            events = [e.event for e in log_before]
            recovered = [e for e in events if isinstance(e, RunRecovered)]
            assert [(r.previous_owner, r.epoch) for r in recovered] == [(frozen.lease_owner, 2)]
            results = Counter(
                (e.turn_index, e.tool_call_id) for e in events if isinstance(e, ToolResultRecorded)
            )
            assert list(results.values()) == [1]
            [result] = [e for e in events if isinstance(e, ToolResultRecorded)]
            assert_valid_history(await rt.state(run_id))
            key = idempotency_key(run_id, "call_0_0")
            if tool == "notify_slowly":
                assert result.source == "reconciled"
                assert len(delivered(key)) == 1  # the message went out once
                assert side_effects().count(tool) == 1
            else:
                assert result.source == "executed"
                assert side_effects().count(tool) == 2  # read_only: B ran it again
                assert len({e["pid"] for e in side_effects().entries(tool)}) == 2
    finally:
        for w in workers:
            w.stop()
        await store.close()
