"""A worker paused past its lease stops before its next effect.

Worker A (a ``stead worker`` process, 2 s lease) runs ``notify_when_clear``, a
non_idempotent tool that works for a while and looks at ``ctx.aborted`` right before it
sends its message. A is frozen with SIGSTOP while the tool works; its lease lapses in the
store, worker B (another process) takes the run over, reconciles the call ("not done"),
sends the message and finishes the run. A is then woken with SIGCONT, its tool's work done:
a process cannot know it was paused, but ``ctx.aborted`` answers from the lease's local
deadline (monotonic: it ran on while A was stopped), so A's tool stands down before any
timer of A's has run. The message went out once, and A gives the run up as fenced.

The same on SQLite (processes on one host) and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from _crash_harness import Scenario
from _scenario import delivered, side_effects
from _workers import WorkerProc

from _wait import until_async
from stead.core.canonical import idempotency_key
from stead.runtime import Runtime
from stead.store import open_store
from stead.testing import assert_valid_history

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, scenario: Scenario) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{scenario.store}"
    return str(request.getfixturevalue("pg_url"))


async def test_a_worker_paused_past_its_lease_does_not_perform_its_effect(
    url: str, tmp_path: Path
) -> None:
    import _fleet

    agent = _fleet.careful()
    gate = tmp_path / "gate"
    store = open_store(url)
    workers: list[WorkerProc] = []
    try:
        async with Runtime(store, agents=[agent]) as rt:
            run_id = await rt.start(agent, "Tell on-call about order 7")
            key = idempotency_key(run_id, "call_0_0")
            a = WorkerProc(
                url, tmp_path / "a.log", "--lease-ttl", "2", "--poll", "0.1",
                env={"STEAD_TEST_GATE": str(gate)},
            )  # fmt: skip
            workers.append(a)

            async def a_works() -> bool:
                return side_effects().count("working") == 1

            await until_async(a_works, "worker A to start the tool", every=0.01)
            a.signal(signal.SIGSTOP)

            async def lease_lapsed() -> bool:
                return ((await store.get_run(run_id)).lease_expires_at or 0) < time.time()

            await until_async(lease_lapsed, "A's lease to lapse")
            b = WorkerProc(url, tmp_path / "b.log", "--lease-ttl", "30", "--poll", "0.1")
            workers.append(b)

            async def b_finished() -> bool:
                return (await store.get_run(run_id)).status == "completed"

            await until_async(b_finished, "worker B to take the run over and finish it")
            assert len(delivered(key)) == 1
            log_before = await store.read_events(run_id)

            gate.touch()  # A's tool has done its work: on waking it goes to its effect
            a.signal(signal.SIGCONT)

            async def a_stood_down() -> bool:
                return side_effects().count("stood_down") == 1

            await until_async(a_stood_down, "A's tool to see that its lease is gone")

            async def a_gave_up() -> bool:
                return f"run {run_id} fenced" in a.text()

            await until_async(a_gave_up, "A to give the run up")
            assert await asyncio.to_thread(a.stop) == 0, a.text()
            assert await asyncio.to_thread(b.stop) == 0, b.text()

            assert len(delivered(key)) == 1  # the message went out once: B's
            senders = [e["pid"] for e in side_effects().entries("notify_when_clear")]
            assert senders == [b.pid]
            # Each holder saw its own fencing token, and the later holder's is higher.
            tokens = {e["pid"]: e["detail"]["token"] for e in side_effects().entries("working")}
            assert tokens[b.pid] > tokens[a.pid] >= 1
            assert await store.read_events(run_id) == log_before  # A wrote nothing after
            assert_valid_history(await rt.state(run_id))
    finally:
        for w in workers:
            w.stop()
        await store.close()
