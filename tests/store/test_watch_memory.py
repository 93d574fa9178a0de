"""What a waiter costs the ``Watcher``: every run a PostgreSQL worker holds has one for its
whole drive (its cancel watcher), so its size is part of the memory per held run (issue 15)."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Sequence

from stead.store._watch import Watcher

WAITERS = 500


async def test_a_waiter_is_a_future_not_an_event_and_a_task() -> None:
    """Measured 4,904 bytes a waiting call (its own task included) with an ``asyncio.Event``
    and a task waiting on it; 1,698 with a future and a timer."""

    seqs: dict[str, int] = {}

    async def read(run_ids: Sequence[str]) -> dict[str, int]:
        return {r: seqs.get(r, 0) for r in run_ids}

    watcher = Watcher(read, poll_interval=3600.0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        calls = [
            asyncio.ensure_future(watcher.wait_changed(f"run-{i:04d}", 0, 3600.0))
            for i in range(WAITERS)
        ]
        for _ in range(5):
            await asyncio.sleep(0)
        each = (tracemalloc.get_traced_memory()[0] - before) / WAITERS
    finally:
        tracemalloc.stop()
    assert not any(c.done() for c in calls)
    seqs["run-0007"] = 3
    watcher.changed("run-0007", 3)  # a notice still wakes its waiter, which reads again
    assert await asyncio.wait_for(calls[7], 30) == 3
    print(f"{each:.0f} bytes a waiting call")
    for c in calls:
        c.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    await watcher.close()
    assert each < 2500, each
