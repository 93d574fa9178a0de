"""A pool's keys against its tasks, on both stores: what the ledger says it holds and what it
really runs must agree, or a key waits for a holder that will never settle it.

- A task that ends after the pool began a newer one for the same key forgets its own entry
  only (``Pool._drop``); a pool whose lease lapsed never takes its own running call over.
- A key held by the pool with no task running it is given up by its heartbeat as a takeover
  would after a lapsed lease: a claim whose reply was lost (committed under the pool's name,
  never heard by it: both keys go back to the queue and run once), a ``started`` whose reply
  was lost (the write committed, the pool saw a ``StoreError``: the read_only call runs
  again, the non_idempotent one is settled ``tool_unknown`` and never runs). Before, the key
  stayed held by a live executor, never settled: its owner waited for ever.
- PostgreSQL, the server SIGKILLed (``STEAD_FULL_POOL_TESTS=1``, in ``make soak``): a
  read_only call's settle, which does not wait for the WAL flush, is lost with the server
  while its claim and start were flushed; the pool, alive, holds the key with no task, its
  heartbeat gives it back, the call runs again and the owner reads the one settle there is.

The pool runs in this process (``Pool.run`` as a task on its own store connection), so these
tests are quick.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _pool_scenario import QUEUE

import stead
from _wait import until, until_async
from stead.core.effects import (
    REPLAY_POLICY,
    Assignment,
    AssignmentKey,
    ToolBody,
    ToolSucceeded,
    ToolUnknown,
    assignment_to_json,
)
from stead.core.events import EffectClass
from stead.errors import StoreError
from stead.runtime import Pool, StoreExecutor
from stead.store import open_store
from stead.store.ledger._ledger import Claimed, KeyRow, Ledger, ledger_for
from stead.testing import PostgresServer, ScriptedModel

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STEAD_TEST_EFFECTS", str(tmp_path / "effects.db"))
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
async def ledger(url: str) -> AsyncIterator[Ledger]:
    store = open_store(url)
    led = ledger_for(store, poll_interval=0.05)
    yield led
    await led.close()
    await store.close()


@stead.tool(effect="read_only", queue=QUEUE)
async def hang(ctx: stead.ToolContext) -> str:
    """Wait until told to stop."""
    reason = await ctx.signal.wait()
    raise stead.Aborted(reason)


RAN: list[str] = []
"""The calls the tools below really made, in order."""


@stead.tool(effect="read_only", queue=QUEUE)
async def look(ctx: stead.ToolContext) -> str:
    """A read."""
    RAN.append("look")
    return "looked"


@stead.tool(effect="non_idempotent", queue=QUEUE)
async def pay(ctx: stead.ToolContext) -> str:
    """A payment: never twice."""
    RAN.append("pay")
    return "paid"


GATE: list[asyncio.Event] = []
"""What ``gated``'s first call waits for."""


@stead.tool(effect="read_only", queue=QUEUE)
async def gated(ctx: stead.ToolContext) -> str:
    """A read whose first call waits for the test's gate."""
    RAN.append("gated")
    if len(RAN) == 1:
        await GATE[0].wait()
    return "read"


@stead.tool(effect="non_idempotent", queue=QUEUE)
async def pay_later(ctx: stead.ToolContext) -> str:
    """A payment that waits for the test's gate."""
    RAN.append("pay_later")
    await GATE[0].wait()
    return "paid"


@pytest.fixture(autouse=True)
def ran() -> None:
    RAN.clear()
    GATE[:] = [asyncio.Event()]


class LoseReply:
    """The pool's hook: at ``point``, once per tool, raise what a write whose reply was lost
    raises (the write committed; the pool never heard that it did)."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.lost: set[str | None] = set()

    def __call__(self, point: str, tool: str | None) -> None:
        if point == self.point and tool not in self.lost:
            self.lost.add(tool)
            raise StoreError("the connection died before the reply came")


class pool_running:
    """A ``Pool`` serving ``QUEUE`` as a task of this loop, on its own store connection."""

    def __init__(self, url: str, tools: list[Any], **options: Any) -> None:
        a = stead.Agent("strays", ScriptedModel(["x"]), tools=tools)
        self.pool = Pool(url, [a], queues=[QUEUE], poll_interval=0.02, **options)

    async def __aenter__(self) -> Pool:
        self.task = asyncio.ensure_future(self.pool.run())
        await until_async(
            lambda: self.pool.ledger.serves(QUEUE, now=time.time()), "the pool serving", timeout=20
        )
        return self.pool

    async def __aexit__(self, *exc: object) -> None:
        self.pool.stop()
        self.pool.stop()
        await self.task
        await self.pool.close()


def job(effect_id: str, tool: str, effect_class: EffectClass = "read_only") -> Assignment:
    return Assignment(
        key=AssignmentKey(session_id="s", run_id="r1", effect_id=effect_id),
        body=ToolBody(
            tool_name=tool, definition_digest="", arguments="{}", effect_class=effect_class,
            replay_policy=REPLAY_POLICY[effect_class], tool_call_id="c", turn_index=0,
            idempotency_key="k", attempt=1,
        ),
    )  # fmt: skip


async def lapse(ledger: Ledger, executor: str) -> None:
    """End ``executor``'s lease now, as if it froze past it (its heartbeat renews it later)."""
    async with ledger._tx() as s:
        await s.run(
            ledger._q("UPDATE executors SET lease_expires_at = 0 WHERE executor_id = ?"),
            (executor,),
        )


async def kinds(ledger: Ledger, effect_id: str) -> list[str]:
    return [e.kind for e in await ledger.history(effect_id)]


async def test_an_ending_task_forgets_only_its_own_entry(url: str) -> None:
    """The key's entry is a newer task's by the time the old task ends (the old one gave
    the key back, a store failure before its start, and the pool's next claim took it again
    before the old task's done callbacks ran): the old task's end must not forget the new
    one, or the pool no longer hears the run's cancel for it, counts a slot free that is
    not, and gives up the key as one it holds with no task."""
    pool = Pool(url, [stead.Agent("strays", ScriptedModel(["x"]), tools=[hang])], queues=[QUEUE])
    try:
        a = assignment_to_json(job("e1", "hang"))
        pool._start(Claimed("e1", 1, {}, False, QUEUE))  # ends at once: undecodable
        first = pool._running["e1"][0]
        pool._start(Claimed("e1", 3, a, True, QUEUE, started=True))  # waits for its signal
        task, sig, c = pool._running["e1"]
        await asyncio.wait_for(first, 10)
        await asyncio.sleep(0.01)  # its done callbacks ran
        assert "e1" in pool._running and pool._running["e1"][0] is task and c.epoch == 3
        sig.abort("the test is over")
        await asyncio.wait_for(task, 10)
        assert "e1" not in pool._running
    finally:
        await pool.close()


async def test_a_claim_whose_reply_was_lost_is_given_back(url: str, ledger: Ledger) -> None:
    """Claimed under the pool's name before it ever ran (what a claim whose reply the pool
    never got leaves): its first heartbeat gives both keys back and it performs each once."""
    owner = StoreExecutor(ledger.store, ledger=ledger, queue_of=lambda _: QUEUE)
    jobs = [job("e1", "look"), job("e2", "pay", "non_idempotent")]
    for a in jobs:
        assert await owner.dispatch(a, signal=stead.AbortSignal())
    serving = pool_running(url, [look, pay], lease_ttl=1.5)
    lost = await ledger.claim(serving.pool.id, [QUEUE], limit=5, now=time.time(), start=True)
    assert sorted(c.effect_id for c in lost) == ["e1", "e2"]
    async with serving:
        outcomes = [await asyncio.wait_for(owner.outcome(a.key), 10) for a in jobs]
    assert outcomes == [ToolSucceeded(content="looked"), ToolSucceeded(content="paid")]
    assert sorted(RAN) == ["look", "pay"]
    for a in jobs:
        history = await kinds(ledger, a.key.effect_id)
        assert history[-4:] == ["restarted", "claimed", "started", "settled"]


async def test_a_start_whose_reply_was_lost_is_recovered_by_its_class(
    url: str, ledger: Ledger
) -> None:
    """``started`` committed, the pool saw a ``StoreError`` (its task ended, the key stayed
    held): the read_only call goes back to the queue and runs; the non_idempotent one is
    settled ``tool_unknown`` (it may have happened, as far as anyone can tell) and never
    runs, as after an executor that died once it had started it."""
    owner = StoreExecutor(ledger.store, ledger=ledger, queue_of=lambda _: QUEUE)
    async with pool_running(url, [look, pay], lease_ttl=1.5, hook=LoseReply("after_start")):
        read = await asyncio.wait_for(owner.run(job("e1", "look"), signal=stead.AbortSignal()), 10)
        a = job("e2", "pay", "non_idempotent")
        paid = await asyncio.wait_for(owner.run(a, signal=stead.AbortSignal()), 10)
    assert read == ToolSucceeded(content="looked")
    assert isinstance(paid, ToolUnknown) and "no task running it" in paid.reason
    assert RAN == ["look"]
    assert (await kinds(ledger, "e1"))[-5:] == [
        "started", "restarted", "claimed", "started", "settled"
    ]  # fmt: skip
    assert await kinds(ledger, "e2") == ["accepted", "claimed", "started", "settled"]


async def test_a_pool_whose_lease_lapsed_does_not_take_its_own_call_over(
    url: str, ledger: Ledger
) -> None:
    """Its lease lapsed while it ran a payment (it froze, its heartbeat was late): another
    executor may take the key over, but its own claims, which go on meanwhile, must not.
    Before, they did at once: the running payment was settled ``tool_unknown`` by the pool
    that was about to settle it paid."""
    owner = StoreExecutor(ledger.store, ledger=ledger, queue_of=lambda _: QUEUE)
    async with pool_running(url, [pay_later], lease_ttl=3.0) as pool:
        a = job("e1", "pay_later", "non_idempotent")
        waiting = asyncio.ensure_future(owner.run(a, signal=stead.AbortSignal()))
        await until_async(lambda: RAN == ["pay_later"], "pay_later ran", timeout=20)
        for _ in range(6):  # lapsed for 0.3 s (the heartbeat may renew it: lapse it again)
            await lapse(ledger, pool.id)
            await asyncio.sleep(0.05)
        GATE[0].set()
        outcome = await asyncio.wait_for(waiting, 10)
    assert outcome == ToolSucceeded(content="paid")
    assert RAN == ["pay_later"]
    assert await kinds(ledger, "e1") == ["accepted", "claimed", "started", "settled"]


def _wal_writer(server: PostgresServer, setting: str) -> None:
    """``wal_writer_delay`` (how often unsynced commits are flushed) set by a restart, then
    one flush of the WAL writer's own, as in tests/store/test_ledger_lost_claim.py (why
    both: there): 10 s while the test runs."""
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM {setting}".encode())
    server.stop()
    server.start()
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(b"CREATE TABLE IF NOT EXISTS wal_pad (x text)")
        conn.execute(b"SET synchronous_commit = off")
        conn.execute(
            b"INSERT INTO wal_pad SELECT string_agg(md5(random()::text), '') "
            b"FROM generate_series(1, 800)"
        )
        end = conn.execute(b"SELECT pg_current_wal_insert_lsn()").fetchone()

        def flushed() -> bool:
            row = conn.execute(b"SELECT pg_current_wal_flush_lsn() >= %s", end).fetchone()
            return bool(row and row[0])

        what = "the WAL writer to flush an unsynced commit of 25 kB"
        until(flushed, what, timeout=10, every=0.01)


async def _lease(ledger: Ledger, executor: str) -> float:
    async with ledger._reading() as s:
        row = await s.one(
            ledger._q("SELECT lease_expires_at FROM executors WHERE executor_id = ?"), (executor,)
        )
    return -1.0 if row is None else float(row[0])


@pytest.mark.skipif(
    not os.environ.get("STEAD_FULL_POOL_TESTS"),
    reason="STEAD_FULL_POOL_TESTS=1 (make soak) kills the server under a lost settle: 25 s, and "
    "it moves the WAL's end, where test_ledger_lost_claim's staging is sensitive to it",
)
async def test_postgres_a_settle_lost_with_the_server_runs_again(
    crashable_postgres: PostgresServer, crashable_pg_url: str
) -> None:
    server = crashable_postgres
    await asyncio.to_thread(_wal_writer, server, "SET wal_writer_delay = '10s'")
    store = open_store(crashable_pg_url)
    led = ledger_for(store, poll_interval=0.05)
    owner = StoreExecutor(store, ledger=led, queue_of=lambda _: QUEUE)
    try:
        # A heartbeat commits synced, so it flushes every third of the lease: 3 s here.
        async with pool_running(crashable_pg_url, [gated], lease_ttl=9.0) as pool:
            a = job("e1", "gated")
            assert await owner.dispatch(a, signal=stead.AbortSignal())
            await until_async(
                lambda: RAN == ["gated"], "gated ran", timeout=20
            )  # claimed and started, unsynced
            other = assignment_to_json(job("e0", "gated"))
            # A synced commit (a key of a queue nobody serves) flushes the claim and start.
            assert await led.accept(
                ("e0", "r0", "s"), kind="tool", queue="nobody", assignment=other, now=time.time()
            )
            before = await _lease(led, pool.id)

            async def beaten() -> bool:
                return await _lease(led, pool.id) != before

            # A heartbeat just flushed; the next one is 3 s away.
            await until_async(beaten, "a heartbeat", timeout=20)
            GATE[0].set()
            await until_async(lambda: pool.performed == 1, "the call settled (not flushed)")
            await asyncio.to_thread(server.kill)
            await asyncio.to_thread(server.start)

            async def read() -> KeyRow | None:
                try:
                    return await led.read("e1", now=time.time())
                except StoreError:  # the store reconnects at its first call
                    return None

            row = await until_async(read, "the key read again", timeout=5, every=0.1)
            assert row is not None and (row.phase, row.executor) == ("started", pool.id)
            outcome = await asyncio.wait_for(owner.outcome(a.key), 30)
        assert outcome == ToolSucceeded(content="read")
        assert RAN == ["gated", "gated"]  # read_only: it ran again, as after a crash
        assert await kinds(led, "e1") == [
            "accepted", "claimed", "started", "restarted", "claimed", "started", "settled",
        ]  # fmt: skip
    finally:
        await led.close()
        await store.close()
        if not server.running:
            await asyncio.to_thread(server.start)
        await asyncio.to_thread(_wal_writer, server, "RESET wal_writer_delay")
