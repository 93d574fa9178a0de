"""Two processes that both try to continue the same run: exactly one drives it.

* Both start together: one claims the lease, the other is refused (LeaseHeld, a Conflict).
* A zombie: the owner is frozen (SIGSTOP) past its lease, a second process takes the run over
  and finishes it; when the first wakes (SIGCONT) its writes are refused (Fenced).
Either way the history holds each result once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from pathlib import Path

from _crash_harness import Scenario, finish
from _scenario import RUN_ID, side_effects

from _wait import until
from stead.core.events import ToolResultRecorded
from stead.store import SQLiteStore


def _results(store: str) -> Counter[tuple[int, str]]:
    async def read() -> list[object]:
        s = SQLiteStore(store)
        try:
            return [e.event for e in await s.read_events(RUN_ID)]
        finally:
            await s.close()

    return Counter(
        (e.turn_index, e.tool_call_id)
        for e in asyncio.run(read())
        if isinstance(e, ToolResultRecorded)
    )


def _create(scenario: Scenario) -> None:
    from _scenario import agent

    import stead

    async def create() -> None:
        a = agent("slow")
        async with stead.Runtime(f"sqlite:///{scenario.store}", agents=[a]) as rt:
            await rt.start(a, "Where is order 7?", run_id=RUN_ID)

    asyncio.run(create())


def test_two_processes_race_for_one_run(scenario: Scenario, tmp_path: Path) -> None:
    _create(scenario)
    # The owner stays in its tool until the other process has had its try: with a fixed
    # pause, a process that a loaded machine started late found the run already completed.
    gate = tmp_path / "rival-done"
    env = {"STEAD_TEST_SLOW": "60", "STEAD_TEST_SLOW_GATE": str(gate)}
    procs = [scenario.spawn("contend", "slow", "30", **env) for _ in range(2)]
    until(
        lambda: (
            any(p.poll() is not None for p in procs) or side_effects().count("slow_lookup") >= 2
        ),
        "a process to end or both to reach the tool",
    )
    gate.touch()  # one ended (the loser, if the lease held) or both are in the tool (not)
    children = [finish(p, *p.communicate(timeout=60)) for p in procs]
    codes = sorted(c.returncode for c in children)
    assert codes == [0, 3], [c.stderr for c in children]
    loser = next(c for c in children if c.returncode == 3)
    assert loser.out is not None and loser.out["error"] == "LeaseHeld"
    assert side_effects().count("slow_lookup") == 1
    assert set(_results(scenario.store).values()) == {1}


def test_zombie_owner_is_fenced(scenario: Scenario) -> None:
    _create(scenario)
    # A: short lease, a slow tool. Freeze it inside the tool, past its lease.
    a = scenario.spawn("contend", "slow", "1.0", STEAD_TEST_SLOW="1.5")
    until(lambda: side_effects().count("slow_lookup"), "A to reach its tool", timeout=30)
    os.kill(a.pid, signal.SIGSTOP)
    try:
        time.sleep(1.5)  # A's lease (1 s) lapses while it is frozen
        b = scenario.run("contend", "slow", "30", STEAD_TEST_SLOW="0")
        assert b.returncode == 0, b.stderr
        assert b.out is not None and b.out["status"] == "completed"
    finally:
        os.kill(a.pid, signal.SIGCONT)
    a_child = finish(a, *a.communicate(timeout=60))
    assert a_child.returncode == 3, a_child.stderr
    assert a_child.out is not None and a_child.out["error"] == "Fenced"
    # The read_only lookup ran in both (allowed for its class); its result is recorded once.
    assert side_effects().count("slow_lookup") == 2
    assert set(_results(scenario.store).values()) == {1}
