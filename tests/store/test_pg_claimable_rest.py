"""PostgreSQL wakes every connection that listens to anything in the database at each commit
that notifies, whatever the channel (measured on PostgreSQL 15: each listening backend woken
about 0.09 times a durable step of the whole fleet, so a worker's share of the server's CPU
grew with the number of workers). A worker whose slots are full does not claim: its store
stops listening for claimable runs a moment after its last wait (``CLAIMABLE_LINGER``), and
listens again at its next wait, which then ends at once so the worker claims what became
claimable unheard. Counted in notices delivered, never timed."""

from __future__ import annotations

import asyncio

import pytest
from _backends import postgres_backend
from _builders import T0, created, seeded

from _wait import until_async
from stead.store.postgres import PostgresStore

pytestmark = pytest.mark.timeout(60)

TTL = 30.0
LISTENER = (
    "SELECT query FROM pg_stat_activity WHERE application_name = 'stead-listen'"
    " AND datname = current_database()"  # the server is shared by the xdist workers
)


async def test_a_store_nobody_waits_on_hears_no_claimable_run_and_claims_them_later(
    pg_url: str,
) -> None:
    async with postgres_backend(pg_url) as b:
        worker, writer = b.open(poll_interval=3600.0), b.open()
        assert isinstance(worker, PostgresStore)
        worker.CLAIMABLE_LINGER = 0.2
        watched = await seeded(writer, "run-watched")

        # Waiting for work: every new run is a notice to it.
        await worker.wait_claimable(timeout=10)  # starts listening; connecting wakes it
        await until_async(
            lambda: worker._listener.listening(worker.claimable_channel), "listening", timeout=30
        )
        await worker.wait_claimable(timeout=0)  # whatever wake-up connecting left behind
        waiting = asyncio.ensure_future(worker.wait_claimable(timeout=3600))
        before = worker.notices
        await writer.create_run(created("run-1"), now=T0)
        await waiting  # only the notice can end an hour-long wait
        assert worker.notices == before + 1

        # Its slots full, it waits no more: its connection leaves PostgreSQL's listeners.
        await until_async(
            lambda: b.sql(LISTENER)[0][0].startswith("UNLISTEN"), "UNLISTEN", timeout=30
        )
        before = worker.notices
        for i in range(5):
            await writer.create_run(created(f"run-{i + 2}"), now=T0 + 1 + i)
        # A notice it does hear, committed after those five: delivered in commit order, so
        # had it still listened for claimable runs, their notices would have come first.
        changed = asyncio.ensure_future(worker.wait_changed("run-watched", watched.written, 30))
        await until_async(
            lambda: worker._listener.listening(worker.run_channel("run-watched")), "run", timeout=30
        )
        watched.final_turn()
        seq = await watched.flush(writer, now=T0 + 10)
        assert await changed == seq
        await until_async(lambda: worker.notices > before, "the run's notice", timeout=30)
        assert worker.notices == before + 1  # that one: none of the five runs

        # Waiting again, it listens again and claims once more at once: nothing waits for
        # the hour-long poll, and nothing that became claimable meanwhile is missed.
        await asyncio.wait_for(worker.wait_claimable(timeout=3600), 30)
        got = await worker.claim_next(owner="w", now=T0 + 20, ttl=TTL, limit=10)
        assert {c.run_id for c in got} == {f"run-{i}" for i in range(1, 7)}
