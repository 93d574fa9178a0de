"""Callers of a PostgreSQL store wait for a connection in the store's own queue, not the pool's.

A worker that claims a thousand runs has a thousand loads asking for one of ten connections
at once. Each waiter queued inside ``psycopg_pool`` cost about 4 KiB (its client, condition,
``wait_for`` task and timer); a waiter on the store's semaphore is one future. Counted in the
pool's own statistics, never timed.
"""

from __future__ import annotations

import asyncio

import pytest
from _builders import seeded

from stead.errors import StoreError
from stead.store.postgres import PostgresStore

pytestmark = pytest.mark.timeout(60)


async def test_callers_beyond_the_pools_size_wait_outside_the_pool(pg_url: str) -> None:
    store = PostgresStore(pg_url, min_size=1, max_size=2)
    try:
        await seeded(store, "run-1")
        release = asyncio.Event()
        held = asyncio.Semaphore(0)

        async def hold() -> None:
            async with store._conn():
                held.release()
                await release.wait()

        holders = [asyncio.ensure_future(hold()) for _ in range(2)]
        for _ in holders:
            await held.acquire()  # both of the pool's connections are taken
        reads = [asyncio.ensure_future(store.get_run("run-1")) for _ in range(20)]
        for _ in range(20):
            await asyncio.sleep(0)  # every read has reached its wait
        assert store._pool is not None
        assert store._pool.get_stats()["requests_waiting"] == 0  # was 20
        assert not any(r.done() for r in reads)
        release.set()
        records = await asyncio.gather(*reads)
        assert {r.last_seq for r in records} == {(await store.get_run("run-1")).last_seq}
        await asyncio.gather(*holders)
    finally:
        await store.close()


async def test_a_caller_that_finds_no_connection_in_time_gets_a_store_error(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url, min_size=1, max_size=1, timeout=0.3)
    try:
        await seeded(store, "run-1")
        async with store._conn():
            with pytest.raises(StoreError, match="no PostgreSQL connection free"):
                await store.get_run("run-1")
        assert (await store.get_run("run-1")).run_id == "run-1"  # free again: served
    finally:
        await store.close()


async def test_a_caller_cancelled_while_it_waits_leaves_its_place_to_the_next(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url, min_size=1, max_size=1)
    try:
        await seeded(store, "run-1")
        async with store._conn():
            first = asyncio.ensure_future(store.get_run("run-1"))
            second = asyncio.ensure_future(store.get_run("run-1"))
            for _ in range(5):
                await asyncio.sleep(0)
            first.cancel()
        assert (await second).run_id == "run-1"
        assert first.cancelled()
        assert (await store.get_run("run-1")).run_id == "run-1"
    finally:
        await store.close()
