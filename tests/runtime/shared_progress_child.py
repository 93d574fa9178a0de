"""Child process for the shared-progress tests: drive one run whose model streams its
chunks and then holds its reply open until the process is killed.

python shared_progress_child.py STORE RUN_ID [CHUNK ...]

Without chunks it starts the run and streams ``CHUNKS``; with them it takes over the run a
killed process left (the run exists) and streams those. The process shares its streamed
text through the store (``share_progress=True``, as ``stead run``, ``stead serve`` and
``stead worker --share-progress`` do).
"""

from __future__ import annotations

import asyncio
import sys

import stead
from stead.providers import ModelCall, ModelResponse

CHUNKS = ["The refund ", "policy allows ", "returns."]


class Stalled:
    """Streams its chunks, then never answers: the test kills the process mid-stream."""

    model_name = "stalled"

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    async def complete(self, call: ModelCall) -> ModelResponse:
        assert call.on_progress is not None, "a sharing Runtime gives its calls a sink"
        for chunk in self.chunks:
            call.on_progress(chunk)
        await asyncio.Event().wait()
        raise AssertionError("the stream is never finished")


async def main(store: str, run_id: str, *chunks: str) -> None:
    agent = stead.Agent("stalled", Stalled(list(chunks) or CHUNKS), [])
    # A short lease: its keeper renews it often, so the test sees a renewal soon.
    async with stead.Runtime(store, agents=[agent], share_progress=True, lease_ttl=3.0) as rt:
        if not chunks:
            await rt.start(agent, "The refund policy?", run_id=run_id)
        await rt.run(run_id)  # a run whose owner died on this host is taken over at once


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
