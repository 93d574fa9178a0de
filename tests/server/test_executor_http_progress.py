"""Progress from afar over HTTP (issue 11 part 6): a model call performed by
``serve_executor`` streams its text to the owner's ``HttpExecutor(progress=...)`` window,
in order, in a generation the owner opened, before the final message comes back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import stead
from stead._signal import AbortSignal
from stead.core.effects import Assignment, AssignmentKey, ModelBody, ModelSucceeded
from stead.core.messages import AssistantMessage, Usage, UserMessage, message_to_json
from stead.core.progress import ProgressWindow
from stead.providers import ModelCall, ModelResponse
from stead.server._executor_http import HttpExecutor, serve_executor

pytestmark = pytest.mark.timeout(60)

SECRET = "executor-secret-for-the-progress-test"
CHUNKS = ["Hel", "lo ", "wor", "ld"]
REQUEST = {
    "model": "streamer", "system": "", "tools": [], "max_output_tokens": None,
    "messages": [message_to_json(UserMessage(content="hi"))], "turn_index": 0, "settings": {},
}  # fmt: skip


class Streamer:
    """Streams ``CHUNKS``, then holds its reply until the owner has shown them (``seen``, at
    most 20 s): the test does not depend on timing."""

    model_name = "streamer"

    def __init__(self) -> None:
        self.seen = asyncio.Event()

    async def complete(self, call: ModelCall) -> ModelResponse:
        assert call.on_progress is not None
        for chunk in CHUNKS:
            call.on_progress(chunk)
            await asyncio.sleep(0.02)
        await asyncio.wait({asyncio.ensure_future(self.seen.wait())}, timeout=20)
        message = AssistantMessage(text="".join(CHUNKS), stop_reason="end_turn")
        usage = Usage(input_tokens=1, output_tokens=1)
        return ModelResponse(message=message, usage=usage, model=self.model_name)


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
        for _ in range(1000):
            if ports:
                break
            await asyncio.sleep(0.01)
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
