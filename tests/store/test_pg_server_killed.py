"""A PostgreSQL store whose server was killed (SIGKILL, the postmaster and every backend).

Every call made while the server is down fails at once with a ``StoreError`` that names the
server and the reason; none waits for the pool's timeout, and no psycopg exception escapes
but as a cause. Once the server is back on the same data, the same store works again from
its first call: the pooled connections that died with the old server are not handed out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import psycopg
import pytest
from _builders import T0, RunBuilder, created

from stead.errors import StoreError
from stead.store.postgres import PostgresStore
from stead.testing import PostgresServer
from stead.testing._postgres import ephemeral_ports

pytestmark = pytest.mark.timeout(60)

TTL = 30.0
POOL_TIMEOUT = 60.0
"""Far longer than any wait below: a call that queued on the pool would time the test out."""


async def test_calls_fail_at_once_while_the_server_is_down_and_work_once_it_is_back(
    crashable_postgres: PostgresServer, crashable_pg_url: str
) -> None:
    server = crashable_postgres
    store = PostgresStore(crashable_pg_url, timeout=POOL_TIMEOUT)
    try:
        b = RunBuilder("r1")
        await b.create(store)
        epoch = await store.claim("r1", owner="w1", now=T0, ttl=TTL)
        b.start("w1", epoch)
        await b.flush(store, epoch=epoch)
        # Several pooled connections, every one of them to die with the server.
        await asyncio.gather(*(store.read_events("r1") for _ in range(4)))

        await asyncio.to_thread(server.kill)
        b.tool_turn()
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "get_run": lambda: store.get_run("r1"),
            "read_events": lambda: store.read_events("r1"),
            "load": lambda: store.load("r1"),
            "list_runs": lambda: store.list_runs(),
            "append": lambda: b.flush(store, epoch=epoch),
            "renew": lambda: store.renew("r1", owner="w1", epoch=epoch, now=T0, ttl=TTL),
            "release": lambda: store.release("r1", owner="w1", epoch=epoch),
            "claim": lambda: store.claim("r1", owner="w1", now=T0, ttl=TTL),
            "claim_next": lambda: store.claim_next(owner="w2", now=T0, ttl=TTL),
            "create_run": lambda: store.create_run(created("r2"), now=T0),
        }
        for name, call in calls.items():
            with pytest.raises(StoreError) as raised:
                await asyncio.wait_for(call(), 10)
            error = raised.value
            assert f"127.0.0.1:{server.port}" in str(error), name
            assert not isinstance(error, psycopg.Error), name
            assert isinstance(error.__cause__, psycopg.Error), name

        await asyncio.to_thread(server.start)
        # The first call after the restart already works, and so does everything after it.
        record = await asyncio.wait_for(store.get_run("r1"), 10)
        assert (record.last_seq, record.epoch, record.lease_owner) == (2, epoch, "w1")
        await asyncio.wait_for(b.flush(store, epoch=epoch), 10)
        await store.renew("r1", owner="w1", epoch=epoch, now=T0, ttl=TTL)
        assert [e.event for e in await store.read_events("r1")] == b.log
    finally:
        await store.close()


def test_the_port_kept_across_restarts_is_outside_the_ephemeral_range(
    crashable_postgres: PostgresServer,
) -> None:
    """A killed server starts again on its port; while it is down no client socket's local
    end may take it, as one could take a port from ``bind(0)`` (the restart then failed:
    "could not bind", seen under the suite's load)."""
    low, high = ephemeral_ports()
    assert not low <= crashable_postgres.port <= high, (crashable_postgres.port, low, high)


async def test_a_call_waiting_for_a_connection_when_the_server_dies_fails_at_once(
    crashable_postgres: PostgresServer, crashable_pg_url: str
) -> None:
    """Every pooled connection is in use when the server dies, so the next call waits for
    the pool to make one, which it cannot: the call probes the server while it waits and
    fails naming it, where the pool alone would have kept it ``POOL_TIMEOUT`` seconds."""
    server = crashable_postgres
    store = PostgresStore(crashable_pg_url, min_size=1, max_size=2, timeout=POOL_TIMEOUT)
    held, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with store._conn():  # the pool's one connection, busy elsewhere
            held.set()
            await release.wait()

    await RunBuilder("r1").create(store)
    holder = asyncio.ensure_future(hold())
    try:
        await held.wait()
        await asyncio.to_thread(server.kill)
        with pytest.raises(StoreError) as raised:
            await asyncio.wait_for(store.get_run("r1"), 10)
        assert "unreachable" in str(raised.value), raised.value
        assert f"127.0.0.1:{server.port}" in str(raised.value)
        assert isinstance(raised.value.__cause__, psycopg.Error)
    finally:
        release.set()
        await asyncio.gather(holder, return_exceptions=True)
        await store.close()
        await asyncio.to_thread(server.start)
