"""The worker SIGKILLed in the middle of an MCP call: a new process finishes the run, and the
call it makes again carries the same idempotency key (mcp_child.py, mcp_server.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _mcp import Ledger

import stead
from stead.core.events import RunRecovered, ToolCallRequested

CHILD = Path(__file__).parent / "mcp_child.py"
RUN_ID = "run_mcp_crash"


def spawn(store: Path, mode: str, *extra: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), f"sqlite:///{store}", mode, *extra],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_mid_call_then_resume(tmp_path: Path, ledger: Ledger, *extra: str) -> dict[str, object]:
    """Start the run in one worker, SIGKILL it (and its stdio server) while the server is in
    the middle of upsert_ticket, then finish the run in a second worker."""
    store = tmp_path / "runs.db"
    first = spawn(store, "start", *extra, STEAD_MCP_HANG="upsert_ticket")
    try:
        started = ledger.wait_for("started", "upsert_ticket")
    finally:
        first.kill()  # mid-call: the server holds the call open
        first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    with contextlib.suppress(
        ProcessLookupError
    ):  # its stdio server, orphaned (it would also exit when it reads the closed stdin)
        os.kill(int(started[0]["pid"]), signal.SIGKILL)
    second = spawn(store, "run", *extra)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


# Two child processes in turn, each paying stead's and the SDKs' imports, and waits of
# 60 + 30 + 60 s for their steps: on a busy machine the whole outlasts the default 120 s.
@pytest.mark.timeout(240)
async def test_worker_killed_mid_mcp_call_a_new_process_finishes_with_the_same_key(
    tmp_path: Path, ledger: Ledger
) -> None:
    result = kill_mid_call_then_resume(tmp_path, ledger)
    assert result["status"] == "completed"
    rows = ledger.rows("started", "upsert_ticket")
    assert len(rows) == 2, "sent once by each worker"
    assert rows[0]["key"] == rows[1]["key"]
    assert rows[0]["pid"] != rows[1]["pid"]
    async with stead.Runtime(tmp_path / "runs.db") as rt:
        events = [s.event for s in await rt.events(RUN_ID)]
    keys = [e.idempotency_key for e in events if isinstance(e, ToolCallRequested)]
    assert rows[0]["key"] == keys[1]
    assert any(isinstance(e, RunRecovered) for e in events)
    assert [r["tool"] for r in ledger.rows("done")] == ["lookup_order", "upsert_ticket"]
