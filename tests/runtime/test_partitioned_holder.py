"""A worker cut off from PostgreSQL past its lease stops before its effect, and gives the run
up quietly once the network heals.

Worker A runs in a network namespace of its own, reaching PostgreSQL over a veth pair (and a
relay on this side's end of it: the test server listens on loopback only). While A's tool
``notify_when_clear`` works, the test takes the veth link down: A's renewals go unanswered,
its lease lapses in the store, and worker B (in this namespace) takes the run over,
reconciles the call and sends the message. A's tool then reaches its effect, still cut off:
its lease's local deadline passed, so ``ctx.aborted`` is True and it stands down. The link
comes up again; A hears nothing it can act on (it gave the run up as fenced), writes nothing,
and stops cleanly. The message went out once. Root only (network namespaces).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from _crash_harness import Scenario
from _netns import Netns, need_root_and_ip
from _relay import Relay
from _scenario import delivered, side_effects
from _workers import WorkerProc

from _wait import until_async
from stead.core.canonical import idempotency_key
from stead.runtime import Runtime
from stead.store import open_store
from stead.testing import assert_valid_history

pytestmark = pytest.mark.timeout(180)


async def test_a_worker_cut_off_past_its_lease_does_not_perform_its_effect(
    pg_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    need_root_and_ip()
    import _fleet

    agent = _fleet.careful()
    gate = tmp_path / "gate"
    netns = Netns()
    relay = Relay(pg_url, host=netns.host)
    store = open_store(pg_url)
    workers: list[WorkerProc] = []
    try:
        async with Runtime(store, agents=[agent]) as rt:
            run_id = await rt.start(agent, "Tell on-call about order 7")
            key = idempotency_key(run_id, "call_0_0")
            a = WorkerProc(
                relay.url, tmp_path / "a.log", "--lease-ttl", "2", "--poll", "0.1",
                env={"STEAD_TEST_GATE": str(gate)}, netns=netns.name,
            )  # fmt: skip
            workers.append(a)

            async def a_works() -> bool:
                return side_effects().count("working") == 1

            await until_async(a_works, "worker A to start the tool", every=0.01)
            netns.cut()

            async def lease_lapsed() -> bool:
                return ((await store.get_run(run_id)).lease_expires_at or 0) < time.time()

            await until_async(lease_lapsed, "A's lease to lapse")
            b = WorkerProc(pg_url, tmp_path / "b.log", "--lease-ttl", "30", "--poll", "0.1")
            workers.append(b)

            async def b_finished() -> bool:
                return (await store.get_run(run_id)).status == "completed"

            await until_async(b_finished, "worker B to take the run over and finish it")
            log_before = await store.read_events(run_id)

            gate.touch()  # A's tool reaches its effect, A still cut off

            async def a_stood_down() -> bool:
                return side_effects().count("stood_down") == 1

            await until_async(a_stood_down, "A's tool to see that its lease is gone")
            netns.heal()

            async def a_gave_up() -> bool:
                return f"run {run_id} fenced" in a.text()

            await until_async(a_gave_up, "A to give the run up")
            assert a.proc.poll() is None, a.text()  # alive, and quiet about it
            assert await asyncio.to_thread(a.stop) == 0, a.text()
            assert await asyncio.to_thread(b.stop) == 0, b.text()

            assert len(delivered(key)) == 1
            assert [e["pid"] for e in side_effects().entries("notify_when_clear")] == [b.pid]
            assert await store.read_events(run_id) == log_before
            assert_valid_history(await rt.state(run_id))
    finally:
        for w in workers:
            w.stop()
        relay.stop()
        netns.close()
        await store.close()
