"""Structured output and deps across a SIGKILL, with real child processes.

An invalid structured answer whose rejection was committed, then a crash: the new process
sends the errors back and gets the valid answer; the invalid one is never accepted. And a run
whose tool reads ``ctx.deps`` resumed in another process gets that process's deps.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _crash_harness import KILLED, Child, finish

from stead.core.events import RunCompleted, ToolCallRequested, ToolResultRecorded
from stead.runtime.loop._owned import OwnedRun
from stead.store.sqlite import SQLiteStore

CHILD = Path(__file__).parent / "output_child.py"
RUN_ID = "run_output_crash"


def _run(store: Path, mode: str, kind: str, name: str, crash: str | None = None) -> Child:
    env = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
    if crash:
        env["STEAD_CRASH_AT"] = crash
    p = subprocess.Popen(
        [sys.executable, str(CHILD), f"sqlite:///{store}", mode, kind, name],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = p.communicate(timeout=60)
    return finish(p, out, err)


def _events(store: Path) -> list[object]:
    async def load() -> list[object]:
        s = SQLiteStore(str(store))
        try:
            await OwnedRun.load_state(s, RUN_ID)
            return [e.event for e in await s.read_events(RUN_ID)]
        finally:
            await s.close()

    return asyncio.run(load())


@pytest.mark.parametrize("crash", ["after_intent#1", "mid_model_call#2"])
def test_an_invalid_structured_answer_then_a_crash_is_retried_not_accepted(
    tmp_path: Path, crash: str
) -> None:
    store = tmp_path / "runs.db"
    first = _run(store, "start", "output", "a", crash=crash)
    assert first.returncode == KILLED, f"{crash} never fired: {first.stderr}"
    logged = _events(store)
    assert not any(isinstance(e, RunCompleted) for e in logged)  # never accepted
    rejected = [e for e in logged if isinstance(e, ToolResultRecorded) and e.is_error]
    assert len(rejected) == 1 and "zip_code: Field required" in rejected[0].content

    second = _run(store, "run", "output", "b")
    assert second.returncode == 0, second.stderr
    assert second.out is not None
    assert second.out["status"] == "completed"
    assert second.out["data"] == {"city": "Paris", "zip_code": "75001"}
    assert second.out["typed"] == "Address"  # typed in the process that did not start it
    events = _events(store)
    (done,) = [e for e in events if isinstance(e, RunCompleted)]
    assert done.data == {"city": "Paris", "zip_code": "75001"}
    finals = [e for e in events if isinstance(e, ToolCallRequested) and e.name == "final_result"]
    assert [e.final for e in finals] == [False, True]  # one refused, one accepted, once each


def test_a_run_resumed_in_another_process_gets_that_process_deps(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    # Killed once the tool call's intent is durable, before the tool ran.
    first = _run(store, "start", "deps", "worker-a", crash="after_intent#1")
    assert first.returncode == KILLED, first.stderr
    second = _run(store, "run", "deps", "worker-b")
    assert second.returncode == 0, second.stderr
    assert second.out is not None and second.out["status"] == "completed"
    output = second.out["output"]
    assert isinstance(output, str) and output.startswith("worker-b (pid ")
    assert str(os.getpid()) not in output
    # deps are never recorded: nothing of worker-a's or worker-b's objects is in the log
    assert not any("worker-a" in repr(e) for e in _events(store))
