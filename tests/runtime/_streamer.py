"""A model that streams ``CHUNKS`` and then waits for its reader (progress-from-afar tests in
tests/runtime and tests/server)."""

from __future__ import annotations

import asyncio

from stead.core.messages import AssistantMessage, Usage
from stead.providers import ModelCall, ModelResponse

CHUNKS = ["Hel", "lo ", "wor", "ld"]


class Streamer:
    """Streams ``CHUNKS`` a little apart, then holds the reply until the owner has shown
    them all (``seen``, at most 20 s), so the test does not depend on timing."""

    model_name = "streamer"

    def __init__(self) -> None:
        self.seen = asyncio.Event()

    async def complete(self, call: ModelCall) -> ModelResponse:
        assert call.on_progress is not None, "the pool gives its model calls a progress sink"
        for chunk in CHUNKS:
            call.on_progress(chunk)
            await asyncio.sleep(0.02)
        await asyncio.wait({asyncio.ensure_future(self.seen.wait())}, timeout=20)
        message = AssistantMessage(text="".join(CHUNKS), stop_reason="end_turn")
        usage = Usage(input_tokens=1, output_tokens=1)
        return ModelResponse(message=message, usage=usage, model=self.model_name)
