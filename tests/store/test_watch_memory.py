"""What a waiter costs the ``Watcher``: every run a PostgreSQL worker holds has one for its
whole drive (its cancel watcher), so its size is part of the memory per held run."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Sequence

from stead.store.sql._watch import Watcher

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


async def test_a_run_watched_in_rounds_has_one_pending_unlisten(pg_url: str) -> None:
    """An owner's cancel watcher waits in short rounds; PostgreSQL keeps a run's channel
    listened to for 5 s after each round, and used to schedule a timer per round: with the
    runtime's 0.2 s watch interval, 25 alive per held run. One pending look per run now."""
    from _backends import postgres_backend
    from _builders import seeded

    from stead.store.postgres import PostgresStore

    async with postgres_backend(pg_url) as b:
        store = b.open()
        assert isinstance(store, PostgresStore)
        run = await seeded(store, "run-1")
        for _ in range(20):
            assert await store.wait_changed("run-1", run.written, 0.01) == run.written
        loop = asyncio.get_running_loop()
        pending = [
            h
            for h in loop._scheduled  # type: ignore[attr-defined]
            if getattr(h, "_callback", None) == store._drop_if_unwatched and not h.cancelled()
        ]
        assert len(pending) == 1, len(pending)
