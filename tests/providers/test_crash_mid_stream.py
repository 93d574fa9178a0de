"""A worker SIGKILLed while a model reply streams; a new process finishes the run.

The server holds the reply half-sent; the test kills the worker (a real child process). The
dead worker recorded nothing for the call, so the resumed worker issues the same request
again, and the run ends with exactly one assistant message for that turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_runs import stream
from wire_server import WireServer

import stead
from stead.core.events import AssistantMessageRecorded, ModelCallFailed, RunRecovered
from stead.core.messages import AssistantMessage
from stead.core.states import RunStatus
from stead.testing import assert_valid_history

CHILD = Path(__file__).with_name("stream_child.py")
RUN_ID = "run_crash_mid_stream"


def spawn(store: str, kind: str, url: str, mode: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_CRASH")}
    return subprocess.Popen(
        [sys.executable, str(CHILD), store, RUN_ID, kind, url, mode],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_frames(child: subprocess.Popen[str], until: str) -> str:
    """Read the child's progress lines until their text reaches ``until`` (or it exits)."""
    assert child.stdout is not None
    text = ""
    for line in child.stdout:
        if line.startswith("{") and "generation" in line:
            text += json.loads(line)["text"]
            if text == until:
                break
    return text


# Two child processes in turn, each paying stead's and the SDKs' imports, and waits of
# 120 + 30 + 120 s for their steps: on a busy machine the whole outlasts the default 120 s,
# and one process's start alone may outlast 60 s.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_killed_mid_stream_then_resumed_in_a_new_process(
    kind: str, server: WireServer, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    text = ("Order 42 ", "has ", "shipped ", "with DHL.")
    stalled = stream(kind, *text, stall_after=5 if kind == "anthropic" else 3)
    server.push(
        stream(kind, tools=[("call_1", "lookup_order", ['{"order_id": 42}'])]),
        stalled,  # turn 1, first try: two deltas, then the server holds the stream
        stream(kind, *text),  # turn 1 again, from the new process
    )

    first = spawn(store, kind, server.url, "start")
    try:
        # wait until the worker has shown the two deltas the server sent before stalling
        shown = await asyncio.wait_for(  # 120 s: a process's start may outlast 60 s
            asyncio.to_thread(read_frames, first, "Order 42 has "), 120
        )
        assert stalled.stalled.is_set() and not stalled.release.is_set()
        first.send_signal(signal.SIGKILL)
        _, err = first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == -signal.SIGKILL, err
    assert shown == "Order 42 has "  # provisional text, never made durable
    assert stalled.client_closed.wait(10)  # the kernel closed the dead worker's connection

    second = spawn(store, kind, server.url, "run")
    try:
        out, err = second.communicate(timeout=120)  # over 60 s beside three xdist workers
    finally:  # not left running past the test (its Popen then warns in a later test)
        if second.poll() is None:
            second.kill()
            second.communicate()
    assert second.returncode == 0, err
    final = json.loads(out.strip().splitlines()[-1])
    assert final == {"status": "completed", "output": "Order 42 has shipped with DHL."}

    # the dead worker's half reply left no trace; the new one re-issued the same request
    assert len(server.requests) == 3
    assert server.requests[2].body == server.requests[1].body
    async with stead.Runtime(store) as rt:
        state = await rt.state(RUN_ID)
        events = [e.event for e in await rt.events(RUN_ID)]
    assert state.status is RunStatus.COMPLETED
    assert_valid_history(state)
    replies = [e for e in events if isinstance(e, AssistantMessageRecorded)]
    assert [(r.turn_index, r.message.text) for r in replies] == [
        (0, ""),
        (1, "Order 42 has shipped with DHL."),
    ]
    assert sum(isinstance(m, AssistantMessage) for m in state.messages) == 2
    assert not any(isinstance(e, ModelCallFailed) for e in events)
    assert any(isinstance(e, RunRecovered) for e in events)
