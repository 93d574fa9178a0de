"""``stead runs watch`` in another process shows a run's streamed text (a Pydantic AI
agent's, a native agent's) while the model's stream is still open: the driving process
shares its runs' text through the store (``Runtime(share_progress=True)``, as ``stead run``,
``stead serve`` and ``stead worker --share-progress`` do), and the watcher reads it beside
the run's events. Only the finished reply is durable."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from _pai_agents import agent as make_agent
from wire_server import WireServer
from wire_shapes import anthropic_stream

import stead
from _wait import until
from stead.core.states import RunStatus
from stead.providers.anthropic import AnthropicModel

STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]


def _watch(store: str, run_id: str) -> subprocess.Popen[bytes]:
    """``stead runs watch RUN`` in a child process, its output on a pipe."""
    env = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
    return subprocess.Popen(
        [*STEAD, "--store", store, "runs", "watch", run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**env, "COLUMNS": "160"},
    )


@pytest.mark.parametrize("kind", ["pydantic_ai", "native"])
async def test_runs_watch_in_another_process_shows_the_text_while_it_streams(
    kind: str, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'r.db'}"
    seen = bytearray()
    with WireServer() as server:
        stalled = anthropic_stream("The refund ", "policy allows ", "returns.", stall_after=5)
        server.push(stalled)
        agent: Any = (
            make_agent(server.url, name="streamer")
            if kind == "pydantic_ai"
            else stead.Agent(
                "streamer",
                AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url),
                [],
            )
        )
        async with stead.Runtime(store, agents=[agent], share_progress=True) as rt:
            run_id = await rt.start(agent, "The refund policy?")
            driving = asyncio.ensure_future(rt.run(run_id))
            watcher = _watch(store, run_id)
            assert watcher.stdout is not None
            out = watcher.stdout

            def read() -> None:
                while chunk := os.read(out.fileno(), 4096):
                    seen.extend(chunk)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            try:
                await asyncio.to_thread(
                    until, lambda: b"The refund policy allows" in seen, "the streamed text"
                )
                # The provider has not sent the rest yet: the text came from the live stream.
                assert stalled.stalled.is_set() and not stalled.release.is_set()
                assert b"completed" not in seen
                stalled.release.set()
                view = await driving
                code = await asyncio.to_thread(watcher.wait, 60)
            finally:
                stalled.release.set()
                if watcher.poll() is None:
                    watcher.kill()
                    watcher.wait(10)
            reader.join(10)
            out.close()
    assert view.status is RunStatus.COMPLETED
    assert view.output == "The refund policy allows returns."
    assert code == 0, seen.decode(errors="replace")
