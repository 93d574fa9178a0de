"""Fleet-wide model concurrency: 3 executor processes hold one model queue to 2 calls.

The model is a real HTTP server on 127.0.0.1 speaking OpenAI's streaming wire format
(tests/providers/wire_server.py), reached through the official SDK by each executor; the
server counts the calls in flight. 20 runs at once, limit 2 (``--max-concurrent 2`` on
every executor): the server never sees more than 2 at a time, and every run completes.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pool_scenario import MODEL_QUEUE, model_agent
from test_pool_processes import Executors

import stead
from _wait import until_async
from stead.store import open_store
from stead.store.ledger._ledger import ledger_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))

from wire_server import WireServer
from wire_shapes import openai_stream


class Counting:
    """A ``WireServer`` whose streamed replies each take ``hold`` seconds, counting the
    requests in flight (and the most at once)."""

    def __init__(self, hold: float) -> None:
        self.server = WireServer()
        self.lock = threading.Lock()
        self.now = self.most = 0
        original = self.server._stream

        def counted(h: Any, reply: Any) -> None:
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                time.sleep(hold)
                original(h, reply)
            finally:
                with self.lock:
                    self.now -= 1

        self.server._stream = counted  # type: ignore[method-assign]


@pytest.fixture
def model_server() -> Iterator[Counting]:
    c = Counting(hold=0.2)
    with c.server:
        yield c


async def test_three_executors_hold_a_model_to_two_calls(
    pg_url: str, model_server: Counting
) -> None:
    """On PostgreSQL, the fleet's store (on SQLite every executor shares one machine, and
    the same code holds the limit under its single write lock)."""
    url = pg_url
    base = model_server.server.url
    model_server.server.push(*[openai_stream("done", model="m1") for _ in range(20)])
    ex = Executors(url)
    store = open_store(url)
    ledger = ledger_for(store)
    try:
        for _ in range(3):
            ex.spawn(ttl=5.0, POOL_MODEL_URL=base, POOL_MAX_CONCURRENT="2")
        await served_queue(ledger, MODEL_QUEUE)
        a = model_agent(base)
        async with stead.Runtime(url, agents=[a]) as rt:
            ids = [await rt.start(a, f"go {i}") for i in range(20)]
            views = await asyncio.wait_for(asyncio.gather(*(rt.run(r) for r in ids)), 120)
        assert [v.status for v in views] == [stead.RunStatus.COMPLETED] * 20
        assert {v.output for v in views} == {"done"}
        assert len(model_server.server.requests) == 20
        assert 1 <= model_server.most <= 2  # never past the limit (2 seen when not loaded)
    finally:
        ex.kill_all()
        await ledger.close()
        await store.close()


async def served_queue(ledger: Any, queue: str) -> None:
    await until_async(
        lambda: ledger.serves(queue, now=time.time()), f"an executor serving {queue}", timeout=30
    )
