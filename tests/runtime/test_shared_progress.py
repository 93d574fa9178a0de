"""Streamed text shared through the store (``Runtime(share_progress=True)``) when a turn is
streamed again (``runtime/executors/_shared_progress.py``). Across a takeover, on SQLite and
PostgreSQL: a writer SIGKILLed mid-stream leaves its turn's text in the store; the process
that takes the run over streams the turn again, and a watcher in a third process (this one)
is told to drop the dead writer's text and then sees every frame of the new stream, in
order. Within one writer: a model call retried after a retryable failure."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from shared_progress_child import CHUNKS

import stead
from _spawn import python_popen
from _wait import until_async
from stead.core.progress import ProgressFrame, ProgressRead
from stead.errors import ProviderError
from stead.providers import ModelCall, ModelResponse
from stead.runtime import Backoff

STREAMER = Path(__file__).with_name("shared_progress_child.py")
AGAIN = ["A second ", "take on ", "the refund ", "policy, ", "longer than the first."]
"""The turn streamed again by the new owner: more frames than the dead writer left."""


class Screen:
    """What a watcher shows of the streamed text: the frames since the last reset."""

    def __init__(self) -> None:
        self.frames: list[ProgressFrame] = []
        self.resets = 0

    def show(self, read: ProgressRead) -> None:
        if read.reset:
            self.frames, self.resets = [], self.resets + 1
        self.frames += read.frames

    @property
    def text(self) -> str:
        return "".join(f.text for f in self.frames)


async def watch(rt: stead.Runtime, run_id: str, screen: Screen) -> None:
    async for item in rt.follow(run_id, heartbeat=1.0):
        if isinstance(item, ProgressRead):
            screen.show(item)


async def test_a_turn_streamed_again_after_a_takeover_reaches_a_watcher_whole(url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_CRASH")}
    first = python_popen(STREAMER, url, "run_taken", env=env)
    second = None
    screen = Screen()
    try:
        async with stead.Runtime(url) as rt:

            async def started() -> bool:
                return bool(await rt.store.list_runs(limit=1))

            await until_async(started, "the run started", every=0.05)
            watching = asyncio.ensure_future(watch(rt, "run_taken", screen))
            await until_async(lambda: screen.text == "".join(CHUNKS), "the first stream shown")

            first.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.wait, 30)
            # The dead writer's text stays in the store: nobody deleted it.
            second = python_popen(STREAMER, url, "run_taken", *AGAIN, env=env)
            await until_async(
                lambda: screen.text.endswith(AGAIN[-1]) or second.poll() is not None,
                "the second stream's last frame shown",
            )
            assert second.poll() is None, second.communicate()
            assert screen.text == "".join(AGAIN)
            # Told to drop the dead writer's text once, then every frame of the new stream.
            assert screen.resets == 1
            assert [f.text for f in screen.frames] == AGAIN
            assert [f.sequence for f in screen.frames] == list(range(len(AGAIN)))
            assert {f.turn_index for f in screen.frames} == {0}
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
    finally:
        for child in (first, second):
            if child is not None and child.poll() is None:
                child.send_signal(signal.SIGKILL)
                child.wait(30)


class Retried:
    """Streams ``FIRST`` and fails retryably once a watcher has shown it; the attempt after
    streams ``AGAIN`` and holds its reply open."""

    model_name = "retried"

    def __init__(self) -> None:
        self.shown = asyncio.Event()
        self.calls = 0

    async def complete(self, call: ModelCall) -> ModelResponse:
        assert call.on_progress is not None
        self.calls += 1
        for chunk in FIRST if self.calls == 1 else AGAIN:
            call.on_progress(chunk)
        if self.calls == 1:
            await self.shown.wait()
            raise ProviderError("overloaded", code="provider_unavailable")
        await asyncio.Event().wait()
        raise AssertionError("the reply is never finished")


FIRST = ["An attempt ", "cut short"]


async def test_a_retried_model_call_reaches_a_watcher_as_a_new_stream(tmp_path: Path) -> None:
    """In the writing process too: the next attempt at a turn is a stream of its own."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    model = Retried()
    agent = stead.Agent("retried", model, [])
    screen = Screen()
    fast = Backoff(base=0.001, cap=0.002)
    async with (
        stead.Runtime(url, agents=[agent], share_progress=True, backoff=fast) as writer,
        stead.Runtime(url) as watcher,
    ):
        await writer.start(agent, "go", run_id="run_retried")
        driving = asyncio.ensure_future(writer.run("run_retried"))
        watching = asyncio.ensure_future(watch(watcher, "run_retried", screen))
        try:
            await until_async(lambda: screen.text == "".join(FIRST), "the first attempt shown")
            model.shown.set()
            await until_async(lambda: screen.text.endswith(AGAIN[-1]), "the second attempt shown")
            assert (screen.resets, model.calls) == (1, 2)
            assert [f.text for f in screen.frames] == AGAIN
            assert [f.sequence for f in screen.frames] == list(range(len(AGAIN)))
        finally:
            for task in (watching, driving):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
