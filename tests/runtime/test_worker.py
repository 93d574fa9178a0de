"""``stead worker`` on both backends: claims queued runs, drives many at once, lets a run rest
on a person and picks it up again after the decision, and on SIGTERM finishes what it holds
within the grace period or releases it for another worker."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import _fleet
import pytest
from _crash_harness import KILLED, Scenario
from _scenario import side_effects
from _workers import WorkerProc, statuses

from _wait import until_async
from stead.core.events import RunRecovered, RunStarted
from stead.runtime import Runtime, Worker
from stead.store import open_store

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        yield request.getfixturevalue("pg_url")


async def test_a_worker_drives_runs_recovers_a_dead_ones_and_resumes_after_a_decision(
    url: str, scenario: Scenario, tmp_path: Path
) -> None:
    async with Runtime(url, agents=_fleet.agents()) as rt:
        # A worker process dies (SIGKILL) right after recording that charge_card started.
        charge = await rt.start("charge", "charge 9.00")
        dying = WorkerProc(
            url,
            tmp_path / "dying.log",
            "--lease-ttl", "1", "--poll", "0.1",
            env={"STEAD_CRASH_AT": "after_tool_started:charge_card"},
        )  # fmt: skip
        assert await asyncio.to_thread(dying.wait) == KILLED, dying.text()
        dead_owner = (await rt.store.get_run(charge)).lease_owner
        assert dead_owner is not None

        soak = [await rt.start("soak", f"order {i}") for i in range(6)]
        worker = Worker(url, _fleet.agents(), concurrency=4, lease_ttl=10, poll_interval=0.1)
        serving = asyncio.ensure_future(worker.run())
        try:

            async def rested() -> bool:
                # The lease is released in the commit after the run's last event: wait for
                # both, or this races the worker's release.
                if await statuses(rt.store) != {"completed": 6, "awaiting_approval": 1}:
                    return False
                owners = [(await rt.store.get_run(rid)).lease_owner for rid in [*soak, charge]]
                return owners == [None] * len(owners)

            await until_async(
                rested, "six runs completed, the dead worker's run on a person, released"
            )
            # charge_card may or may not have charged: only a person can say. Not charged:
            assert side_effects().count("charge_card") == 6
            pending = (await rt.get(charge)).approvals[0]
            assert pending.reason == "outcome_unknown"
            await rt.decide(charge, pending.tool_call_id, "not_happened", token=pending.token)

            async def resumed() -> bool:
                return (await rt.store.get_run(charge)).status == "completed"

            await until_async(resumed, "the worker to pick the decided run up again")
        finally:
            worker.stop()
            await serving
            await worker.close()
        assert (await rt.get(charge)).output == "Charged."
        recovered = [e.event for e in await rt.events(charge) if e.event.kind == "run_recovered"]
        assert [(r.previous_owner, r.owner) for r in recovered] == [(dead_owner, worker.owner)]
        for rid in soak:
            log = [e.event for e in await rt.events(rid)]
            assert [e.owner for e in log if isinstance(e, RunStarted)] == [worker.owner]
            assert not [e for e in log if isinstance(e, RunRecovered)]
    assert worker.stats["claimed"] == 8 and worker.stats["taken_over"] == 1
    assert worker.stats["completed"] == 7 and worker.stats["awaiting_approval"] == 1
    charged = side_effects().keys("charge_card")
    assert len(charged) == len(set(charged)) == 7  # one charge per run, none twice


async def test_a_worker_times_out_approvals_nobody_decided(url: str, scenario: Scenario) -> None:
    worker = Worker(url, _fleet.agents(), poll_interval=0.05, approval_sweep=0.1)
    async with Runtime(url, agents=_fleet.agents()) as rt:
        gated = await rt.start("gated", "refund order 9")
        serving = asyncio.ensure_future(worker.run())
        try:

            async def timed_out() -> bool:
                return (await rt.store.get_run(gated)).status == "timed_out"

            await until_async(timed_out, "the worker to time the unanswered approval out")
        finally:
            worker.stop()
            await serving
            await worker.close()
    assert worker.stats["awaiting_approval"] == 1 and worker.stats["approvals_expired"] == 1


@pytest.mark.parametrize(
    ("slow", "grace", "after"),
    [("1.0", "60", "completed"), ("600", "0.2", "running")],
    ids=["finishes-within-grace", "releases-after-grace"],
)
async def test_sigterm_finishes_or_releases_the_runs_in_hand(
    url: str, scenario: Scenario, tmp_path: Path, slow: str, grace: str, after: str
) -> None:
    store = open_store(url)
    try:
        async with Runtime(store, agents=_fleet.agents()) as rt:
            ids = [await rt.start("sleepy", f"nap {i}") for i in range(3)]
            w = WorkerProc(
                url,
                tmp_path / "worker.log",
                "--concurrency", "8", "--poll", "0.1", "--grace", grace,
                env={"STEAD_TEST_SLOW": slow},
            )  # fmt: skip

            async def all_claimed() -> bool:
                recs = [await store.get_run(r) for r in ids]
                return all(r.lease_owner and r.status == "running" for r in recs)

            await until_async(all_claimed, "the worker to claim all three runs")
            w.signal(signal.SIGTERM)
            assert await asyncio.to_thread(w.wait) == 0, w.text()
            recs = [await store.get_run(r) for r in ids]
            assert {r.status for r in recs} == {after}
            assert {r.lease_owner for r in recs} == {None}  # finished, or released at once
            assert {r.epoch for r in recs} == {1}
            assert "stopping: 3 runs in hand" in w.text()
            if after == "running":
                # Released, not abandoned: another worker takes them without waiting for a
                # lease to lapse (this one's lease is 30 s; the test would time out first).
                second = Worker(store, _fleet.agents(), concurrency=8, poll_interval=0.1)
                serving = asyncio.ensure_future(second.run())

                async def done() -> bool:
                    return await statuses(store) == {"completed": 3}

                try:
                    await until_async(done, "a second worker to finish the released runs")
                finally:
                    second.stop()
                    await serving
                assert second.stats["claimed"] == 3
    finally:
        await store.close()
