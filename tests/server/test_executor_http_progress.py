"""Progress from afar over HTTP: a model call performed by
``serve_executor`` streams its text to the owner's ``HttpExecutor(progress=...)`` window,
in order, in a generation the owner opened, before the final message comes back."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

import stead
from _wait import until_async
from stead._signal import AbortSignal
from stead.core.effects import Assignment, AssignmentKey, ModelBody, ModelSucceeded
from stead.core.messages import UserMessage, message_to_json
from stead.core.progress import ProgressWindow
from stead.server._executor_http import HttpExecutor, serve_executor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from _streamer import CHUNKS, Streamer

pytestmark = pytest.mark.timeout(60)

SECRET = "executor-secret-for-the-progress-test"
REQUEST = {
    "model": "streamer", "system": "", "tools": [], "max_output_tokens": None,
    "messages": [message_to_json(UserMessage(content="hi"))], "turn_index": 0, "settings": {},
}  # fmt: skip


async def test_a_model_call_far_away_streams_to_the_owners_window() -> None:
    model = Streamer()
    agent = stead.Agent("far-stream", model)  # type: ignore[arg-type]
    frames: list[Any] = []

    def listen(frame: Any) -> None:
        frames.append(frame)
        if "".join(f.text for f in frames) == "".join(CHUNKS):
            model.seen.set()

    ports: list[int] = []
    stop = asyncio.Event()
    serving = asyncio.ensure_future(
        serve_executor([agent], tokens={SECRET: "owner"}, port=0, ready=ports.append, stop=stop)
    )
    try:
        await until_async(lambda: ports, "the server's port", timeout=10)
        window = ProgressWindow(listeners=[listen])
        ex = HttpExecutor(f"http://127.0.0.1:{ports[0]}", SECRET, poll=0.01, progress=window)
        try:
            key = AssignmentKey(session_id="s", run_id="r-far", effect_id="m1")
            body = ModelBody(model="streamer", request=REQUEST, request_digest="")
            outcome = await ex.run(Assignment(key=key, body=body), signal=AbortSignal())
        finally:
            await ex.close()
    finally:
        stop.set()
        await serving
    assert isinstance(outcome, ModelSucceeded)
    assert outcome.response.message.text == "Hello world"
    assert model.seen.is_set() and "".join(f.text for f in frames) == "Hello world"
    assert {(f.run_id, f.generation) for f in frames} == {("r-far", 1)}
    assert [f.sequence for f in frames] == list(range(len(frames)))
