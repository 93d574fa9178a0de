"""The settlement watcher: the ``Watcher`` a ledger's waiters share (store/sql/_watch.py), fed by
the ledger's settle marks (0 while a key is open, its settle's position after) and, on
PostgreSQL, by its LISTEN connection.

- A key whose every change is heard needs one read: later waiters trust it and the notices
  after it (concurrent first waiters are shared one level up, by ``StoreExecutor``).
- A reconnect (notices may have been lost) makes every waiter read again, and a settle whose
  notice was lost is seen by it.
- PostgreSQL, end to end: the LISTEN connection terminated before each of six settles, each
  committed while it is down (its notice lost) and the poll an hour away: every waiter still
  gets its outcome, by the reconnect's re-read, and two waiters on a key share one wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import psycopg
import pytest
from test_ledger_store import T0, accept

from _wait import until_async
from stead.core.effects import AssignmentKey, ToolSucceeded
from stead.errors import StoreError
from stead.runtime import StoreExecutor
from stead.store import open_store
from stead.store.ledger._ledger import ledger_for
from stead.store.sql._watch import Watcher

pytestmark = pytest.mark.timeout(60)


class Marks:
    """The keys' settle marks, and how many times the watcher read them."""

    def __init__(self) -> None:
        self.marks: dict[str, int] = {}
        self.reads = 0

    async def read(self, keys: Sequence[str]) -> dict[str, int]:
        self.reads += 1
        return {k: self.marks.get(k, 0) for k in keys}


async def _settle_loop() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_waiters_on_a_heard_key_share_one_read_and_its_notices() -> None:
    m = Marks()
    watcher = Watcher(m.read, poll_interval=3600.0)
    try:
        watcher.heard(["k"])  # its channel is listened to (the ledger's on_watch says so)
        first = asyncio.ensure_future(watcher.wait_changed("k", 0, 3600.0))
        await _settle_loop()
        assert m.reads == 1
        later = [asyncio.ensure_future(watcher.wait_changed("k", 0, 3600.0)) for _ in range(4)]
        await _settle_loop()
        assert m.reads == 1 and not any(w.done() for w in [first, *later])
        watcher.changed("k", 4)  # the settle's notice carries its position
        assert await asyncio.wait_for(asyncio.gather(first, *later), 10) == [4] * 5
        assert m.reads == 1
    finally:
        await watcher.close()


async def test_a_reconnect_makes_every_waiter_read_again() -> None:
    m = Marks()
    watcher = Watcher(m.read, poll_interval=3600.0)
    try:
        watcher.heard(["k1", "k2"])
        w1 = asyncio.ensure_future(watcher.wait_changed("k1", 0, 3600.0))
        w2 = asyncio.ensure_future(watcher.wait_changed("k2", 0, 3600.0))
        await _settle_loop()
        reads = m.reads
        m.marks["k1"] = 4  # settled while the connection was down: its notice is lost
        watcher.changed_all()  # what the listener says once it is back
        assert await asyncio.wait_for(w1, 10) == 4
        await _settle_loop()
        assert not w2.done() and m.reads == reads + 2  # each waiter read once more
        m.marks["k2"] = 5
        watcher.changed("k2", 5)  # not heard since the reconnect: the notice wakes a read
        assert await asyncio.wait_for(w2, 10) == 5
    finally:
        await watcher.close()


def _terminate_listeners(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'stead-listen' AND pid <> pg_backend_pid()"
            " AND datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


async def test_postgres_every_settle_is_seen_through_a_killed_listen_connection(
    pg_url: str,
) -> None:
    store = open_store(pg_url)
    owner = ledger_for(store, poll_interval=3600.0)  # notices and reconnects alone
    executor = ledger_for(store)  # claims and settles: it listens to nothing
    ex = StoreExecutor(store, ledger=owner, wait_round=3600.0)
    keys = [AssignmentKey(session_id="s", run_id="r1", effect_id=f"e{i}") for i in range(6)]
    waits: list[asyncio.Future[object]] = []
    try:
        for k in keys:
            assert await accept(owner, k.effect_id)
        await executor.heartbeat("x", ["q"], ttl=60, now=T0)
        claims = {c.effect_id: c for c in await executor.claim("x", ["q"], limit=6, now=T0)}
        waits += [asyncio.ensure_future(ex.outcome(k)) for k in keys for _ in range(2)]
        channel = owner._channel("effects:r1")  # type: ignore[attr-defined]
        await until_async(
            lambda: owner.listener.listening(channel), "the owner listening", timeout=5
        )
        assert len(ex._reads) == 6  # one wait per key, for its two waiters
        for i, k in enumerate(keys):
            assert _terminate_listeners(pg_url) >= 1
            # the listener saw its connection go
            await until_async(
                lambda: not owner.listener.connected,
                "the listener to see its connection go",
                timeout=5,
            )
            content = {"kind": "tool_succeeded", "content": str(i)}
            c = claims[k.effect_id]
            assert await executor.settle(
                k.effect_id, epoch=c.epoch, outcome=content, now=T0, executor="x"
            )
            got = await asyncio.wait_for(asyncio.gather(*waits[2 * i : 2 * i + 2]), 20)
            assert got == [ToolSucceeded(content=str(i))] * 2
        assert all(w.done() for w in waits)
    finally:
        for w in waits:
            w.cancel()
        await owner.close()
        await executor.close()
        await store.close()


async def test_a_notice_during_a_heard_keys_first_read_is_not_lost() -> None:
    """The first read of a heard key began before its settle and returns 0; the settle's
    notice came while it was on the way. The waiter returns the notice's position: the read
    does not hide it (it would wait for the poll, an hour here)."""
    m = Marks()
    reading = asyncio.Event()
    release = asyncio.Event()

    async def slow_read(keys: Sequence[str]) -> dict[str, int]:
        reading.set()
        await release.wait()
        return await m.read(keys)  # its snapshot: before the settle

    watcher = Watcher(slow_read, poll_interval=3600.0)
    try:
        watcher.heard(["k"])
        waiting = asyncio.ensure_future(watcher.wait_changed("k", 0, 3600.0))
        await asyncio.wait_for(reading.wait(), 10)
        watcher.changed("k", 4)
        release.set()
        assert await asyncio.wait_for(waiting, 10) == 4
    finally:
        await watcher.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_closing_the_ledger_wakes_and_ends_its_waiters(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """Waiters still registered on a ledger's watcher when it is closed end (a typed error
    naming the key), instead of waiting out their timeout on a watcher nobody feeds any
    more: woken at once where notices and the poller feed them (PostgreSQL, its poll an hour
    away), at their next look where each polls on its own (SQLite, every 50 ms); a
    claimable waiter is woken too."""
    if backend == "postgres":
        store = open_store(request.getfixturevalue("pg_url"))
        led = ledger_for(store, poll_interval=3600.0)
    else:
        store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
        led = ledger_for(store, poll_interval=0.05)
    try:
        assert await accept(led, "e1")
        waiters = [asyncio.ensure_future(led.wait_settled("e1", "r1", 3600.0)) for _ in range(2)]
        claimable = asyncio.ensure_future(led.watch.wait_claimable(3600.0))
        await _settle_loop()
        assert not any(w.done() for w in [*waiters, claimable])
        await led.close()
        for w in waiters:
            with pytest.raises(StoreError, match="e1: the watcher was closed"):
                await asyncio.wait_for(w, 5)
        await asyncio.wait_for(claimable, 5)
    finally:
        await store.close()
