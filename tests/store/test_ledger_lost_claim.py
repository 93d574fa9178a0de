"""A claim the database server lost: PostgreSQL commits a claim without waiting for the WAL
flush (``PostgresLedger``), so a crash of the server can lose it while its executor performs
the effect. The key is then accepted again, the next claim makes the same epoch number, and
only the executor's name, which ``start`` and ``settle`` give besides the epoch, fences the
old holder (``_ledger._held``).

- Both stores: a holder's ``start`` and ``settle`` are refused to another executor at the
  same epoch (the state a lost claim leaves, once another executor claimed the key).
- PostgreSQL, the server SIGKILLed: a read_only key's unsynced claim and start are lost, a
  non_idempotent key's synced start made its claim durable; another executor takes the first
  at the same epoch, the old holder's writes are refused and its heartbeat shows it holds
  only the second; one settle lands on each.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
from test_ledger_store import T0, accept, consistent

from stead.store import Store, open_store
from stead.store.ledger._ledger import Ledger, ledger_for
from stead.testing import PostgresServer

pytestmark = pytest.mark.timeout(90)

DONE = {"kind": "tool_succeeded", "content": "ok"}


@pytest.fixture
async def ledger(store: Store) -> AsyncIterator[Ledger]:
    led = ledger_for(store, poll_interval=0.05)
    yield led
    await led.close()


async def test_a_holders_writes_name_it_besides_the_epoch(ledger: Ledger) -> None:
    await accept(ledger, "e1")
    await ledger.heartbeat("b", ["q"], ttl=10, now=T0)
    [c] = await ledger.claim("b", ["q"], limit=1, now=T0)
    # "a" held epoch 1 too, by a claim the server lost: its writes change nothing.
    assert not await ledger.start("e1", epoch=c.epoch, now=T0, executor="a")
    assert await ledger.start("e1", epoch=c.epoch, now=T0, executor="b")
    assert not await ledger.settle("e1", epoch=c.epoch, outcome=DONE, now=T0, executor="a")
    assert await ledger.settle("e1", epoch=c.epoch, outcome=DONE, now=T0, executor="b")
    kinds = [e.kind for e in await ledger.history("e1")]
    assert kinds == ["accepted", "claimed", "started", "settled"]
    assert await consistent(ledger, "e1") == "settled"


def _wal_writer(server: PostgresServer, setting: str) -> None:
    """The WAL writer flushes unsynced commits every ``wal_writer_delay`` (200 ms): made
    10 s while the test runs, so the kill right after the claim finds it unflushed. Applied
    by a restart, not ``pg_reload_conf()``: a reload reaches the WAL writer whenever it next
    looks at its signals, and on a loaded machine it still flushed at the old pace."""
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM {setting}".encode())
    server.stop()
    server.start()


def _switch_wal(server: PostgresServer) -> None:
    """``pg_switch_wal()``: the WAL flushed up to a new segment, where the next record goes."""
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("SELECT pg_switch_wal()")


async def test_postgres_a_claim_lost_with_the_server_fences_its_old_holder(
    crashable_postgres: PostgresServer, crashable_pg_url: str
) -> None:
    server = crashable_postgres
    await asyncio.to_thread(_wal_writer, server, "SET wal_writer_delay = '10s'")
    store = open_store(crashable_pg_url)
    a = ledger_for(store)
    try:
        await a.heartbeat("a", ["q"], ttl=60, now=T0)
        assert await accept(a, "n1", "non_idempotent")
        [n] = await a.claim("a", ["q"], limit=1, now=T0)
        assert await a.start("n1", epoch=n.epoch, now=T0, sync=True, executor="a")
        assert await accept(a, "r1")  # synced: durable whatever comes next
        # The unsynced claim and start go at the start of a fresh WAL segment: written into
        # a page already partly full, they could fill it, and the WAL writer is woken to
        # write out every full page at once (a write the kill then cannot undo).
        await asyncio.to_thread(_switch_wal, server)
        [r] = await a.claim("a", ["q"], limit=1, now=T0)
        assert (r.effect_id, r.epoch) == ("r1", 1)
        assert await a.start("r1", epoch=r.epoch, now=T0, sync=False, executor="a")
        await asyncio.to_thread(server.kill)  # "a" performs r1 on; its claim is not on disk
        await asyncio.to_thread(server.start)
    finally:
        await a.close()
        await store.close()
        if not server.running:
            await asyncio.to_thread(server.start)
        await asyncio.to_thread(_wal_writer, server, "RESET wal_writer_delay")

    store = open_store(crashable_pg_url)  # every process reconnects
    led = ledger_for(store)
    try:
        row = await led.read("r1", now=T0)
        assert row is not None and (row.phase, row.epoch, row.executor) == ("accepted", 0, None)
        row = await led.read("n1", now=T0)  # its synced start flushed its claim with it
        assert row is not None and (row.phase, row.executor) == ("started", "a")
        await led.heartbeat("b", ["q"], ttl=60, now=T0 + 1)
        [again] = await led.claim("b", ["q"], limit=5, now=T0 + 1)
        assert (again.effect_id, again.epoch) == ("r1", r.epoch)  # the same epoch number
        # The old holder: refused at its epoch, and told it holds n1 alone.
        assert not await led.start("r1", epoch=r.epoch, now=T0 + 1, executor="a")
        assert not await led.settle("r1", epoch=r.epoch, outcome=DONE, now=T0 + 1, executor="a")
        held, _ = await led.heartbeat("a", ["q"], ttl=60, now=T0 + 1)
        assert held == {"n1"}
        assert await led.start("r1", epoch=again.epoch, now=T0 + 1, executor="b")
        assert await led.settle("r1", epoch=again.epoch, outcome=DONE, now=T0 + 1, executor="b")
        assert await led.settle("n1", epoch=n.epoch, outcome=DONE, now=T0 + 1, executor="a")
        for effect_id, executor in (("r1", "b"), ("n1", "a")):
            history = await led.history(effect_id)
            assert [e.kind for e in history] == ["accepted", "claimed", "started", "settled"]
            assert history[1].executor == executor
            assert await consistent(led, effect_id) == "settled"
    finally:
        await led.close()
        await store.close()
