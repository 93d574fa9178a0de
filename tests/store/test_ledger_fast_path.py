"""The ledger's fast path (what a pool adds per call, bench/pool_latency.py) keeps its rules.

- PostgreSQL: the acceptance waits for the WAL flush, and a pool's settle of a
  non_idempotent tool (its settle of anything else does not: lost, the key is held with no
  task and its heartbeat gives it back to run again, test_pool_strays.py); the owner's
  acknowledgement does not (lost, the key stays settled, which is as terminal), nor does the
  claim (a lost claim is recovered as an executor that died after it: ``PostgresLedger``);
  a pool's claim writes ``started`` with it for every key but a non_idempotent tool's,
  whose recovery alone the start changes: its own ``started`` waits for the flush. Seen as
  in test_pg_unsynced.py: a deferred constraint trigger notes the ``synchronous_commit``
  each committed write of ``ledger_keys`` saw.
- PostgreSQL: the one-statement claim hands out accepted keys, and still takes the general
  path for an orphaned key (its holder's lease lapsed) and for a queue with a limit.
- PostgreSQL: a run's effects channel stays heard between its effects (no UNLISTEN and
  LISTEN per call).
- SQLite: a waiter sees a settle long before the watcher's poll interval comes round, and
  an executor waiting for work sees a new key long before its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from test_ledger_store import T0, consistent, key, tool_assignment
from test_pg_unsynced import synced_by_default

import stead
from _wait import until_async
from stead.core.effects import REPLAY_POLICY, Assignment, AssignmentKey, ToolBody
from stead.core.events import EffectClass
from stead.runtime import Pool, StoreExecutor
from stead.store import open_store
from stead.store.ledger import _limits
from stead.store.ledger._ledger import ledger_for
from stead.store.postgres import PostgresStore
from stead.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)

NOTE_COMMITS = """
CREATE TABLE ledger_notes (id bigserial PRIMARY KEY, effect_id text NOT NULL,
    phase text NOT NULL, setting text NOT NULL);
CREATE FUNCTION note_ledger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger_notes (effect_id, phase, setting)
    VALUES (NEW.effect_id, NEW.phase, current_setting('synchronous_commit'));
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER note_ledger AFTER INSERT OR UPDATE ON ledger_keys
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_ledger();
"""


def _take(conn: psycopg.Connection[tuple[object, ...]]) -> list[tuple[object, ...]]:
    rows = conn.execute("DELETE FROM ledger_notes RETURNING id, effect_id, phase, setting")
    return [tuple(r[1:]) for r in sorted(rows.fetchall())]


async def test_postgres_the_claim_and_a_safe_start_skip_the_flush(pg_url: str) -> None:
    url = synced_by_default(pg_url)
    store = PostgresStore(url)
    led = ledger_for(store)
    try:
        with psycopg.connect(url, autocommit=True) as notes:
            notes.execute(NOTE_COMMITS.encode())
            for e, cls in (("e1", "read_only"), ("e2", "non_idempotent")):
                a = tool_assignment(e, cls)
                assert await led.accept(key(e), kind="tool", queue="q", assignment=a, now=T0)
            await led.heartbeat("x1", ["q"], ttl=30, now=T0)
            claims = await led.claim("x1", ["q"], limit=5, now=T0, start=True)
            assert sorted((c.effect_id, c.epoch, c.started) for c in claims) == [
                ("e1", 1, True), ("e2", 1, False),
            ]  # fmt: skip
            # The read_only key's claim wrote its start too; neither waited for the flush.
            assert _take(notes) == [
                ("e1", "accepted", "on"), ("e2", "accepted", "on"),
                *sorted([("e1", "started", "off"), ("e2", "claimed", "off")]),
            ]  # fmt: skip
            assert not await led.start("e1", epoch=1, now=T0, sync=False)  # it is started
            assert await led.start("e2", epoch=1, now=T0, sync=True)
            assert _take(notes) == [("e2", "started", "on")]
            assert await led.settle("e1", epoch=1, outcome={"kind": "x"}, now=T0, executor="x1")
            assert _take(notes) == [("e1", "settled", "on")]
            assert await led.acknowledge("e1", now=T0)  # the owner's, before its next call
            assert _take(notes) == [("e1", "acknowledged", "off")]
        # The events the claim wrote in SQL read back as any others, and fold to the row.
        done = ["accepted", "claimed", "started", "settled", "acknowledged"]
        for effect_id, kinds in (("e1", done), ("e2", done[:3])):
            history = await led.history(effect_id)
            assert [(h.kind, h.executor, h.epoch) for h in history] == [
                (k, "x1" if k == "claimed" else None, 0 if k in ("accepted", "acknowledged") else 1)
                for k in kinds
            ]
            assert await consistent(led, effect_id) == history[-1].kind
    finally:
        await led.close()
        await store.close()


@stead.tool(effect="read_only", queue="q")
async def look() -> str:
    """A read."""
    return "looked"


@stead.tool(effect="non_idempotent", queue="q")
async def pay() -> str:
    """A payment."""
    return "paid"


def _job(effect_id: str, tool: str, effect_class: EffectClass) -> Assignment:
    return Assignment(
        key=AssignmentKey(session_id="s", run_id="r1", effect_id=effect_id),
        body=ToolBody(
            tool_name=tool, definition_digest="", arguments="{}", effect_class=effect_class,
            replay_policy=REPLAY_POLICY[effect_class], tool_call_id="c", turn_index=0,
            idempotency_key="k", attempt=1,
        ),
    )  # fmt: skip


async def test_postgres_a_pools_settle_waits_for_the_flush_for_a_non_idempotent_tool_only(
    pg_url: str,
) -> None:
    url = synced_by_default(pg_url)
    store = PostgresStore(url)
    led = ledger_for(store)
    agent = stead.Agent("flush", ScriptedModel(["x"]), tools=[look, pay])
    pool = Pool(PostgresStore(url), [agent], queues=["q"], poll_interval=0.02, lease_ttl=30)
    owner = StoreExecutor(store, ledger=led, queue_of=lambda _: "q")
    try:
        with psycopg.connect(url, autocommit=True) as notes:
            notes.execute(NOTE_COMMITS.encode())
            serving = asyncio.ensure_future(pool.run())
            try:
                for a in (_job("e1", "look", "read_only"), _job("e2", "pay", "non_idempotent")):
                    out = await asyncio.wait_for(owner.run(a, signal=stead.AbortSignal()), 20)
                    assert out.kind == "tool_succeeded"
            finally:
                pool.stop()
                pool.stop()
                await serving
            settles = [n for n in _take(notes) if n[1] == "settled"]
        assert settles == [("e1", "settled", "off"), ("e2", "settled", "on")]
    finally:
        await pool.close()
        await led.close()
        await store.close()


async def test_postgres_claim_takes_orphans_and_limited_queues_by_the_general_path(
    pg_url: str,
) -> None:
    store = open_store(pg_url)
    led = ledger_for(store)
    try:
        for e in ("o1", "f1"):
            a = tool_assignment(e)
            assert await led.accept(key(e), kind="tool", queue="q", assignment=a, now=T0)
        await led.heartbeat("dead", ["q"], ttl=1, now=T0)
        [first, second] = await led.claim("dead", ["q"], limit=2, now=T0)
        assert await led.start(first.effect_id, epoch=1, now=T0)
        # "dead"'s lease lapses: another executor takes both over (restarted, claimed).
        await led.heartbeat("x2", ["q"], ttl=30, now=T0 + 5)
        taken = await led.claim("x2", ["q"], limit=5, now=T0 + 5)
        assert sorted((c.effect_id, c.epoch, c.restarted) for c in taken) == sorted(
            [(first.effect_id, 3, True), (second.effect_id, 3, True)]
        )
        # A queue with a limit: at most that many held, whatever the claim asks.
        for e in ("l1", "l2", "l3"):
            a = tool_assignment(e)
            assert await led.accept(key(e), kind="tool", queue="lim", assignment=a, now=T0)
        await _limits.set_limit(led, "lim", 2)
        await led.heartbeat("x3", ["lim"], ttl=30, now=T0 + 5)
        assert len(await led.claim("x3", ["lim"], limit=5, now=T0 + 5)) == 2
        assert await led.claim("x3", ["lim"], limit=5, now=T0 + 5) == []
    finally:
        await led.close()
        await store.close()


async def test_postgres_a_runs_channel_stays_heard_between_its_effects(pg_url: str) -> None:
    store = open_store(pg_url)
    owner, pool = ledger_for(store), ledger_for(store)
    try:
        channel = owner._channel("effects:r1")  # type: ignore[attr-defined]
        for n, e in enumerate(("e1", "e2")):
            a = tool_assignment(e)
            assert await owner.accept(key(e), kind="tool", queue="q", assignment=a, now=T0)
            await pool.heartbeat("x1", ["q"], ttl=30, now=T0)
            [c] = await pool.claim("x1", ["q"], limit=1, now=T0)
            waiting = asyncio.ensure_future(owner.wait_settled(e, "r1", 20))
            if n == 0:  # the first key of the run: its channel is LISTENed to
                await until_async(
                    lambda: owner.listener.listening(channel), "the owner listening", timeout=10
                )
            else:  # the second is heard from its first read: no LISTEN to wait for
                await asyncio.sleep(0)
                assert e in owner.watch._heard
            assert await pool.settle(e, epoch=c.epoch, outcome={"kind": "x"}, now=T0, executor="x1")
            assert await asyncio.wait_for(waiting, 15) == 3
            assert owner.listener.listening(channel)  # kept for the run's next effect
    finally:
        await owner.close()
        await pool.close()
        await store.close()


async def test_sqlite_a_waiter_sees_a_settle_before_the_poll_interval(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    owner_store, pool_store = open_store(url), open_store(url)
    owner = ledger_for(owner_store, poll_interval=30.0)  # the watcher alone: 30 s
    pool = ledger_for(pool_store)
    try:
        a = tool_assignment("e1")
        assert await owner.accept(key("e1"), kind="tool", queue="q", assignment=a, now=T0)
        await pool.heartbeat("x1", ["q"], ttl=30, now=T0)
        [c] = await pool.claim("x1", ["q"], limit=1, now=T0)
        waiting = asyncio.ensure_future(owner.wait_settled("e1", "r1", 25))

        async def settle_soon() -> None:
            await asyncio.sleep(0.05)
            assert await pool.settle(
                "e1", epoch=c.epoch, outcome={"kind": "x"}, now=T0, executor="x1"
            )

        await settle_soon()
        # Well before the 30 s poll (and the 25 s round): the waiter read the key itself.
        assert await asyncio.wait_for(waiting, 10) == 3
    finally:
        await owner.close()
        await pool.close()
        await owner_store.close()
        await pool_store.close()


async def test_sqlite_an_executor_sees_new_work_before_its_poll_interval(tmp_path: Path) -> None:
    """SQLite: an executor waiting for work (30 s poll) reads for an accepted key of its
    queues, so a key accepted meanwhile ends its wait long before the interval, not at it."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    owner_store, pool_store = open_store(url), open_store(url)
    owner, pool = ledger_for(owner_store), ledger_for(pool_store)
    try:
        await pool.heartbeat("x1", ["q"], ttl=60, now=T0)
        waiting = asyncio.ensure_future(pool.wait_work(["q"], 30.0))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        a = tool_assignment("e1")
        assert await owner.accept(key("e1"), kind="tool", queue="q", assignment=a, now=T0)
        await asyncio.wait_for(waiting, 10)
        [c] = await pool.claim("x1", ["q"], limit=1, now=T0)
        assert c.effect_id == "e1"
    finally:
        await owner.close()
        await pool.close()
        await owner_store.close()
        await pool_store.close()
