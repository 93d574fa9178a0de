"""A run deadline: ``Limits(max_duration=...)`` ends a run ``timed_out``
with the reason, checked by whichever process holds the run, after crashes and restarts
(the deadline is in the log from the run's start), with time spent waiting on a person
counted or not (``duration_counts_waiting``). Other processes' clocks are moved ahead
instead of waiting: no test here waits for the wall clock."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stead
from _wait import until
from stead.core.events import RunDeadlineSet, RunTimedOut
from stead.core.states import RunStatus
from stead.testing import Reply, ScriptedModel, VirtualClock, assert_valid_history

CHILD = Path(__file__).parent / "limits_child.py"
RUN_ID = "run_limits"


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def _child(store: str, mode: str, kind: str, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), store, mode, kind, *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _done(p: subprocess.Popen[str]) -> dict[str, object]:
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_deadline_aborts_a_running_tool_and_a_resume_completes(store: str) -> None:
    # A five-minute deadline on a virtual clock: it passes without being waited for.
    clock = VirtualClock()
    clock.run(_deadline_then_resume(store, clock))


async def _deadline_then_resume(store: str, clock: VirtualClock) -> None:
    started: list[int] = []

    @stead.tool(effect="read_only")
    async def wait_long(ctx: stead.ToolContext) -> str:
        """Wait, until the run is stopped."""
        started.append(ctx.attempt)
        if len(started) == 1:
            await ctx.signal.wait()  # a deadline reaches a tool the way a cancel does
            raise stead.Aborted(ctx.signal.reason)
        return "waited"

    model = ScriptedModel([Reply(tool_calls=[("wait_long", {})]), "finished"])
    limits = stead.Limits(max_duration=300, cancel_grace=5)
    agent = stead.Agent("waiter", model, [wait_long], limits=limits)
    async with stead.Runtime(store, agents=[agent], clock=clock) as rt:
        rid = await rt.start(agent, "go")
        started_at = clock()
        view = await rt.run(rid)
        assert view.status is RunStatus.TIMED_OUT
        assert clock() - started_at == pytest.approx(300, abs=1)  # at its deadline, not later
        assert view.error is not None and view.error["phase"] == "run"
        assert "passed its deadline (Limits.max_duration)" in view.error["message"]
        events = [e.event for e in await rt.events(rid)]
        assert [e.kind for e in events[1:4]] == [
            "agent_recorded",
            "run_started",
            "run_deadline_set",
        ]
        assert isinstance(events[-1], RunTimedOut)
        assert_valid_history(await rt.state(rid))
        # a resume gives a fresh deadline; the open call runs again (read_only)
        again = await rt.resume(rid)
        assert again.status is RunStatus.COMPLETED and again.output == "finished"
        assert started == [1, 1]
        deadlines = [e.event for e in await rt.events(rid) if isinstance(e.event, RunDeadlineSet)]
        assert len(deadlines) == 2 and deadlines[1].deadline > deadlines[0].deadline


def test_a_deadline_fires_in_a_process_that_did_not_start_the_run(
    store: str, tmp_path: Path
) -> None:
    mark = tmp_path / "mark"
    env = {"STEAD_TEST_MARK": str(mark), "STEAD_TEST_MAX_DURATION": "600"}
    first = _child(store, "start", "slow", **env)
    until(mark.exists, "the first process to start its tool", timeout=60)
    assert mark.read_text() == "1\n", first.stderr
    first.kill()  # SIGKILL in the middle of its tool
    first.communicate(timeout=30)
    # Another process, eleven minutes later by its clock: it folds the deadline the first
    # process recorded and ends the run before running anything again.
    second = _done(_child(store, "run", "slow", STEAD_TEST_CLOCK_AHEAD="660", **env))
    assert second["status"] == "timed_out", second
    assert "Limits.max_duration" in str(second["error"])
    assert mark.read_text() == "1\n"  # the tool was not run again


@pytest.mark.parametrize("counts", [True, False])
def test_time_waiting_on_a_person_counts_or_not(store: str, counts: bool) -> None:
    env = {"STEAD_TEST_MAX_DURATION": "600", "STEAD_TEST_WAIT_COUNTS": "1" if counts else "0"}
    first = _child(store, "start", "ask", **env)
    assert first.stdout is not None
    assert json.loads(first.stdout.readline())["status"] == "awaiting_approval"
    first.kill()
    first.communicate(timeout=30)
    # a day later, a worker's sweep (another process) looks at the waiting run
    later = {**env, "STEAD_TEST_CLOCK_AHEAD": "86400"}
    swept = _done(_child(store, "sweep", "ask", **later))
    if counts:
        assert swept["status"] == "timed_out"
        assert "Limits.max_duration" in str(swept["error"])
        return
    assert swept["status"] == "awaiting_approval"  # the wait does not count
    done = _done(_child(store, "answer", "ask", '{"speed": "express"}', **later))
    assert done["status"] == "completed", done

    async def deadlines() -> list[float]:
        async with stead.Runtime(store) as rt:
            return [
                e.event.deadline
                for e in await rt.events(RUN_ID)
                if isinstance(e.event, RunDeadlineSet)
            ]

    first_deadline, moved = asyncio.run(deadlines())
    assert moved - first_deadline >= 86400 - 60  # later by the day the person took


def test_a_negative_max_duration_is_refused() -> None:
    with pytest.raises(stead.UserError, match="max_duration must be a finite number of seconds"):
        stead.Limits(max_duration=-5)
    with pytest.raises(stead.UserError, match="duration_counts_waiting takes True or False"):
        stead.Limits(duration_counts_waiting="no")  # type: ignore[arg-type]


async def test_an_approval_wait_is_left_out_when_waiting_does_not_count(store: str) -> None:
    @stead.tool(requires_approval=True)
    def refund(order_id: int) -> str:
        """Refund an order (a person approves)."""
        return "refunded"

    model = ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 1})]), "Refunded."])
    limits = stead.Limits(max_duration=600, duration_counts_waiting=False)
    agent = stead.Agent("refunds", model, [refund], limits=limits)
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "refund order 1")
        (pending,) = (await rt.run(rid)).approvals
        assert isinstance(pending.payload["asked_at"], float)  # when the wait began
    # an hour later by another process's clock: past max_duration, but the hour was a wait
    later = time.time() + 3600
    async with stead.Runtime(store, agents=[agent], clock=lambda: later) as rt:
        assert await rt.expire_approvals() == []
        await rt.approve(rid, pending.tool_call_id)
        done = await rt.run(rid)
        assert done.status is RunStatus.COMPLETED and done.output == "Refunded."
        first, moved = [
            e.event.deadline for e in await rt.events(rid) if isinstance(e.event, RunDeadlineSet)
        ]
        assert moved - first >= 3600 - 60
