"""Child runs across real processes, on both stores: a child SIGKILLed after its tool's
effect (the seed scenario: the message goes once), the process driving a parent and its
child SIGKILLed while the child works (one child, its result taken once), a cancel of a
parent with a running child and a grandchild waiting on a person, and a child's question
answered with ``stead answer``."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import _family
import pytest
from _crash_harness import KILLED, Scenario
from _scenario import delivered, side_effects
from _workers import WorkerProc

from _wait import until_async
from stead.core.children import link_of
from stead.core.events import ToolResultRecorded
from stead.core.states import RunStatus
from stead.runtime import Runtime
from stead.testing import assert_valid_history

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).parent
STEAD = shutil.which("stead", path=str(Path(sys.executable).parent))
FAMILY = ("--agents", "_family:agents", "--poll", "0.05")


MATRIX = os.environ.get("STEAD_CHILDREN_MATRIX") == "1"
"""Every test on both stores (``make soak``); by default the seed scenario runs on both and
each other test on one of them, to keep the suite quick."""


def _stores(default: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "url", ["sqlite", "postgres"] if MATRIX else [default], indirect=True
    )


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        yield request.getfixturevalue("pg_url")


def _spawn(*args: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    assert STEAD is not None
    out = subprocess.DEVNULL
    return subprocess.Popen([STEAD, *args], cwd=HERE, env=env, stdout=out, stderr=out)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert STEAD is not None
    return subprocess.run(
        [STEAD, *args], cwd=HERE, env=env, capture_output=True, text=True, timeout=60, check=False
    )


async def _child_of(rt: Runtime, run_id: str) -> str:
    (pending,) = (await rt.get(run_id)).approvals
    assert pending.reason == "child", pending
    child = pending.payload["child_run"]
    assert isinstance(child, str)
    return child


async def _results(rt: Runtime, run_id: str) -> list[ToolResultRecorded]:
    return [e.event for e in await rt.events(run_id) if isinstance(e.event, ToolResultRecorded)]


async def _runs_of(rt: Runtime, agent: str) -> list[str]:
    return [r.run_id for r in await rt.store.list_runs(limit=1000) if r.agent == agent]


async def test_a_child_killed_after_sending_is_recovered_and_the_message_goes_once(
    url: str, scenario: Scenario, tmp_path: Path
) -> None:
    async with Runtime(url, agents=_family.agents()) as rt:
        rid = await rt.start("support", "Tell Ada her refund is on its way.")
        dying = WorkerProc(
            url,
            tmp_path / "dying.log",
            *FAMILY,
            "--lease-ttl",
            "1",  # its leases lapse at once for the next worker
            env={"STEAD_CRASH_AT": "after_tool_effect:send_message"},
        )
        assert await asyncio.to_thread(dying.wait) == KILLED, dying.text()
        assert len(delivered()) == 1  # sent; the child's result never recorded
        child = await _child_of(rt, rid)  # the parent still waits on it
        assert (await rt.get(child)).status is RunStatus.AWAITING_TOOL

        worker = WorkerProc(url, tmp_path / "worker.log", *FAMILY)
        try:

            async def done() -> bool:
                return (await rt.store.get_run(rid)).status == "completed"

            await until_async(done, "the parent to complete once a worker recovered its child")
        finally:
            worker.stop()
        assert len(delivered()) == 1 and side_effects().count("send_message") == 1
        (sent,) = await _results(rt, child)
        assert sent.source == "reconciled" and not sent.is_error
        (taken,) = await _results(rt, rid)
        assert taken.content == "Sent." and not taken.is_error
        assert (await rt.get(rid)).output == "Sent."
        assert await _runs_of(rt, "courier") == [child]
        for run in (rid, child):
            assert_valid_history(await rt.state(run))


@_stores("postgres")
async def test_a_parent_killed_while_its_child_works_takes_the_result_once(
    url: str, scenario: Scenario, tmp_path: Path
) -> None:
    """``stead run`` drives the parent to its wait, then the child, in one process: killed
    while the child's tool works; ``stead resume`` of the parent recovers the child and the
    parent goes on."""
    async with Runtime(url, agents=_family.agents()) as rt:
        env = scenario.env(STEAD_TEST_SLOW="600", STEAD_TEST_SLOW_GATE=str(tmp_path / "never"))
        running = _spawn("--store", url, "run", "_family:patient", "look order 7 up", env=env)
        try:

            async def working() -> bool:
                return side_effects().count("slow_lookup") == 1

            await until_async(working, "the child's tool to start")
        finally:
            running.kill()
            running.wait()
        (rid,) = await _runs_of(rt, "patient")
        child = await _child_of(rt, rid)
        assert (await rt.get(child)).status is RunStatus.AWAITING_TOOL

        # `stead resume` of the parent: it rests on its child, so the child is taken over
        # (its owner is dead) and finished, then the parent goes on.
        resume = ("--store", url, "resume", rid, "--agents", "_family:agents")
        resumed = await asyncio.to_thread(_cli, *resume, env=scenario.env(STEAD_TEST_SLOW="0"))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert (await rt.get(rid)).status is RunStatus.COMPLETED, resumed.stdout
        assert await _runs_of(rt, "plodder") == [child]  # no second child
        (taken,) = await _results(rt, rid)
        assert taken.content == "Looked." and not taken.is_error
        assert side_effects().count("slow_lookup") == 2  # read_only: run again
        for run in (rid, child):
            assert_valid_history(await rt.state(run))


@_stores("sqlite")
async def test_cancelling_a_parent_cancels_its_running_and_waiting_descendants(
    url: str, scenario: Scenario, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    async with Runtime(url, agents=_family.agents()) as rt:
        rid = await rt.start("watcher", "two jobs")
        worker = WorkerProc(
            url,
            tmp_path / "worker.log",
            *FAMILY,
            env={"STEAD_TEST_SLOW": "600", "STEAD_TEST_SLOW_GATE": str(gate)},
        )
        try:

            async def spread() -> bool:
                askers = await _runs_of(rt, "asker")
                if not askers or side_effects().count("slow_lookup") != 1:
                    return False
                return (await rt.store.get_run(askers[0])).status == "awaiting_approval"

            await until_async(spread, "a child running and a grandchild waiting on a person")
            (plodder,) = await _runs_of(rt, "plodder")
            (middle,) = await _runs_of(rt, "middle")
            (asker,) = await _runs_of(rt, "asker")
            view = await rt.cancel(rid, "not needed any more")
            assert view.status is RunStatus.CANCELLED
            gate.touch()  # let the running child's tool return: its worker sees the cancel

            async def all_cancelled() -> bool:
                runs = [plodder, middle, asker]
                return [(await rt.store.get_run(r)).status for r in runs] == ["cancelled"] * 3

            await until_async(all_cancelled, "every run of the tree to be cancelled")
        finally:
            worker.stop()
        asked = await rt.state(asker)
        assert "parent run" in (asked.error or {}).get("message", "")
        assert link_of(asked.config) is not None
        for run in (rid, plodder, middle, asker):
            assert_valid_history(await rt.state(run))


async def test_a_childs_question_is_answered_from_the_command_line(
    scenario: Scenario, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    async with Runtime(url, agents=_family.agents()) as rt:
        rid = await rt.start("quizzer", "which speed?")
        view = await rt.run(rid)  # the parent to its wait, the child to its question
        assert view.status is RunStatus.AWAITING_APPROVAL
        child = await _child_of(rt, rid)
        (question,) = (await rt.get(child)).approvals
        assert question.reason == "question"
        answer = ("answer", child, question.tool_call_id, '{"speed": "express"}')
        command = ("--store", url, *answer, "--agents", "_family:agents")
        answered = await asyncio.to_thread(_cli, *command, env=scenario.env())
        assert answered.returncode == 0, answered.stdout + answered.stderr
        assert (await rt.get(child)).status is RunStatus.COMPLETED
        assert (await rt.get(rid)).status is RunStatus.AWAITING_TOOL  # woken, not yet driven
        done = await rt.run(rid)
        assert done.status is RunStatus.COMPLETED
        assert done.output == '{"speed":"express"}'
