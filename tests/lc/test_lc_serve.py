"""A LangChain agent's streamed run watched live from another process: a ``stead serve
--worker`` child drives it (``ChatOpenAI`` with ``streaming=True``); this process reads the
text deltas from the run's SSE stream while the provider's stream is stalled halfway, and
the run keeps only the finished reply."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

import os
from pathlib import Path

from _watch_live import PARTS, Stack, watched_live
from wire_server import WireServer
from wire_shapes import openai_stream

HERE = Path(__file__).parent


def test_a_streamed_reply_is_read_live_from_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WireServer() as wire:
        stalled = openai_stream(*PARTS, stall_after=3)  # its role chunk and two parts
        wire.push(stalled)
        # The child inherits these: the wire server, and where lc_served is.
        monkeypatch.setenv("LC_BASE_URL", wire.url)
        monkeypatch.setenv(
            "PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
        )
        stack = Stack(f"sqlite:///{tmp_path / 'runs.db'}", tmp_path)
        try:
            stack.serve("--worker", "--agents", "lc_served:agents")
            watched_live(stack, "lc_streamer", stalled)
        finally:
            stack.close()
