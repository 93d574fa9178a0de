"""Human approval and cooperative cancellation across real processes, with crashes.

* A process is killed while its run waits for approval; a second process approves, denies or
  edits the call, days later as far as the run can tell, and finishes the run.
* Killing the deciding process right after its decision is durable loses nothing.
* A cancel from another process stops a tool's whole subprocess group and ends the run with a
  valid history; a resume afterwards completes it. Killing the owner right after the cancel
  request is durable still ends the run cancelled, with nothing run twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest
from _crash_harness import KILLED, Scenario, finish
from _scenario import RUN_ID, side_effects, steer_agent

import stead
from _wait import until
from stead.core.events import ApprovalDecided, ToolResultRecorded
from stead.testing import assert_valid_history


def _runtime(scenario: Scenario, kind: str) -> stead.Runtime:
    return stead.Runtime(f"sqlite:///{scenario.store}", agents=[steer_agent(kind)])


async def _state(scenario: Scenario, kind: str) -> stead.core.fold.RunState:
    async with _runtime(scenario, kind) as rt:
        return await rt.state(RUN_ID)


def _results(scenario: Scenario, kind: str) -> list[ToolResultRecorded]:
    async def read() -> list[ToolResultRecorded]:
        async with _runtime(scenario, kind) as rt:
            events = await rt.events(RUN_ID)
        return [e.event for e in events if isinstance(e.event, ToolResultRecorded)]

    return asyncio.run(read())


def _hold_until_waiting(scenario: Scenario) -> None:
    """First process: drive the run to awaiting_approval, then get SIGKILLed while waiting."""
    holder = scenario.spawn("hold", "approval")
    assert holder.stdout is not None
    line = holder.stdout.readline()
    assert json.loads(line)["status"] == "awaiting_approval", line
    holder.kill()
    holder.communicate(timeout=30)  # reap it and close its pipes
    assert holder.returncode == KILLED
    assert side_effects().count("refund") == 0  # nothing ran before the decision


@pytest.mark.parametrize(
    ("decision", "args", "refunded"),
    [
        ("approve", [], [25_000]),
        ("deny", ["too large for this customer"], []),
        ("approve", ["", '{"order_id": 42, "cents": 10000}'], [10_000]),
    ],
)
def test_decide_from_a_second_process_after_the_first_was_killed(
    scenario: Scenario, decision: str, args: list[str], refunded: list[int]
) -> None:
    _hold_until_waiting(scenario)
    second = scenario.run("decide_only", "approval", decision, *args)
    assert second.returncode == 0, second.stderr
    assert second.out == {"status": "completed", "output": "Handled."}
    assert [e["detail"]["cents"] for e in side_effects().entries("refund")] == refunded
    state = asyncio.run(_state(scenario, "approval"))
    assert_valid_history(state)
    (result,) = _results(scenario, "approval")
    if decision == "deny":
        assert result.is_error and "too large for this customer" in result.content


def test_second_decision_wrong_token_and_bad_edit_are_refused(scenario: Scenario) -> None:
    _hold_until_waiting(scenario)

    async def go() -> None:
        async with _runtime(scenario, "approval") as rt:
            view = await rt.get(RUN_ID)
            (pending,) = view.approvals
            assert pending.reason == "policy" and pending.payload["arguments"]["cents"] == 25_000
            before = len(await rt.events(RUN_ID))
            with pytest.raises(stead.ApprovalError, match="token"):
                await rt.approve(RUN_ID, pending.tool_call_id, token="forged")
            with pytest.raises(stead.ApprovalError, match="do not fit"):
                await rt.approve(RUN_ID, pending.tool_call_id, arguments={"cents": "lots"})
            with pytest.raises(stead.ApprovalError, match="consent"):
                await rt.decide(RUN_ID, pending.tool_call_id, "happened", result="x")
            with pytest.raises(stead.ApprovalError, match="reason"):
                await rt.deny(RUN_ID, pending.tool_call_id, "")
            assert len(await rt.events(RUN_ID)) == before
            await rt.approve(RUN_ID, pending.tool_call_id, token=pending.token)
            with pytest.raises(stead.ApprovalError, match="no pending approval"):
                await rt.approve(RUN_ID, pending.tool_call_id, token=pending.token)
            with pytest.raises(stead.ApprovalError, match="no pending approval"):
                await rt.deny(RUN_ID, pending.tool_call_id, "changed my mind")
            decided = [e for e in await rt.events(RUN_ID) if isinstance(e.event, ApprovalDecided)]
            assert len(decided) == 1
            assert (await rt.run(RUN_ID)).output == "Handled."
        assert side_effects().count("refund") == 1

    asyncio.run(go())


def test_killed_right_after_the_approval_is_recorded(scenario: Scenario) -> None:
    _hold_until_waiting(scenario)
    died = scenario.run("decide_only", "approval", "approve", crash="after_approval_commit")
    assert died.returncode == KILLED, died.stderr
    assert side_effects().count("refund") == 0
    done = scenario.run("run", "approval")
    assert done.out == {"status": "completed", "output": "Handled."}, done.stderr
    assert side_effects().count("refund") == 1


# -- cancellation --------------------------------------------------------------------------


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _wait_for(path: Path, timeout: float = 30.0) -> int:
    text = until(lambda: path.exists() and path.read_text().strip(), str(path), timeout=timeout)
    return int(text)


def test_cancel_from_another_process_kills_the_tool_group(
    scenario: Scenario, tmp_path: Path
) -> None:
    pidfile = tmp_path / "job.pid"
    owner = scenario.spawn("start", "cancel", STEAD_TEST_PIDFILE=str(pidfile))
    pgid = _wait_for(pidfile)
    assert len(_group_members(pgid)) >= 2  # sh and its sleeps

    async def cancel() -> stead.RunView:
        async with _runtime(scenario, "cancel") as rt:
            return await rt.cancel(RUN_ID, "operator stopped it", by="test")

    view = asyncio.run(cancel())
    assert view.status.value == "awaiting_tool"  # requested; the owner finishes it
    child = finish(owner, *owner.communicate(timeout=60))
    assert child.returncode == 0, child.stderr
    assert child.out is not None and child.out["status"] == "cancelled"
    assert _group_members(pgid) == []

    state = asyncio.run(_state(scenario, "cancel"))
    assert state.error is not None and state.error["message"] == "operator stopped it"
    assert_valid_history(state)
    (result,) = _results(scenario, "cancel")
    assert result.source == "cancelled" and result.is_error

    again = scenario.run("resume", "cancel", STEAD_TEST_PIDFILE=str(tmp_path / "unused.pid"))
    assert again.out == {"status": "completed", "output": "Finished after resume."}, again.stderr
    assert side_effects().count("long_job") == 1  # the cancelled call is not run again


def test_owner_killed_right_after_cancel_is_requested(scenario: Scenario, tmp_path: Path) -> None:
    pidfile = tmp_path / "job.pid"
    owner = scenario.spawn("start", "cancel", STEAD_TEST_PIDFILE=str(pidfile))
    pgid = _wait_for(pidfile)
    os.kill(owner.pid, signal.SIGSTOP)  # it cannot act on the request...

    async def request() -> None:
        async with _runtime(scenario, "cancel") as rt:
            await rt.cancel(RUN_ID, "stop")

    asyncio.run(request())
    os.kill(owner.pid, signal.SIGKILL)  # ...and dies right after it is durable
    owner.communicate(timeout=30)
    for pid in _group_members(pgid):  # its orphaned subprocesses are not ours to judge
        os.kill(pid, signal.SIGKILL)

    after = scenario.run("run", "cancel", STEAD_TEST_PIDFILE=str(tmp_path / "unused.pid"))
    assert after.out is not None and after.out["status"] == "cancelled", after.stderr
    state = asyncio.run(_state(scenario, "cancel"))
    assert_valid_history(state)
    assert [r.source for r in _results(scenario, "cancel")] == ["cancelled"]
    assert side_effects().count("long_job") == 1
