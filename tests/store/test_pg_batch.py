"""PostgreSQL's group commit writes a batch as one statement (``stead.store.postgres._batch``).

Counted on the wire (libpq's trace of the store's only connection, as in
``test_pg_round_trips``), never timed: a ``Bind`` is a statement sent, a ``ReadyForQuery`` a
round trip. What the one statement must still do for each member (its guard, its events,
its snapshot, its notices) is checked member by member.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import test_pg_round_trips
from _builders import T0, RunBuilder, seeded
from test_pg_round_trips import Wire, failed, round_trips

from _wait import until_async
from stead.errors import Conflict, Fenced
from stead.store.postgres import PostgresStore

pytestmark = pytest.mark.timeout(60)

traced = test_pg_round_trips.traced
"""The store on one traced connection (``test_pg_round_trips``)."""


def statements(wire: list[str]) -> int:
    return sum(1 for line in wire if line.split("\t")[::2] == ["F", "Bind"])


async def append(store: PostgresStore, b: RunBuilder, *, epoch: int = 0, **kw: Any) -> int:
    return await store.append(
        b.run_id, [failed(1)], expected_seq=b.written, epoch=epoch, status=b.status, now=T0,
        **kw,
    )  # fmt: skip


async def test_a_batch_of_appends_is_one_statement(traced: tuple[PostgresStore, Wire]) -> None:
    store, wire = traced
    bs = [await seeded(store, f"run-{i}") for i in range(7)]
    await wire.start(store)
    seqs = await asyncio.gather(*(append(store, b) for b in bs))
    sent = await wire.take(store)
    assert store.group.batches == 1
    assert seqs == [b.written + 1 for b in bs]
    # One statement for the seven (it was BEGIN, one statement a member and COMMIT).
    assert (statements(sent), round_trips(sent)) == (1, 1), sent
    for b in bs:
        events = await store.read_events(b.run_id, b.written)
        assert [(e.seq, e.event) for e in events] == [(b.written + 1, failed(1))]


async def test_a_run_twice_in_a_batch_is_a_second_statement_of_one_transaction(
    traced: tuple[PostgresStore, Wire],
) -> None:
    store, wire = traced
    b0, b1 = [await seeded(store, f"run-{i}") for i in range(2)]
    await wire.start(store)
    outcomes: list[Any] = await asyncio.gather(
        append(store, b0), append(store, b1), append(store, b0), return_exceptions=True
    )
    sent = await wire.take(store)
    assert outcomes[:2] == [b0.written + 1, b1.written + 1]
    assert isinstance(outcomes[2], Conflict)  # the second of run-0 came after the first
    # BEGIN, the two segments' statements and COMMIT, pipelined in one round trip; then the
    # refused member's own read of why (as for any refusal).
    assert (statements(sent), round_trips(sent)) == (4 + 1, 1 + 1), sent


async def test_a_batch_keeps_each_members_snapshot_with_its_run(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        bs = [await seeded(store, f"run-{i}") for i in range(3)]
        for b in bs:
            b.final_turn()
        seqs = await asyncio.gather(
            *(b.flush(store, now=T0 + 2, snapshot=i != 1) for i, b in enumerate(bs))
        )
        assert store.group.batches == 1
        for i, (b, seq) in enumerate(zip(bs, seqs, strict=True)):
            loaded = await store.load(b.run_id)
            assert loaded.record.last_seq == seq
            if i == 1:
                assert (loaded.snapshot_seq, loaded.snapshot) == (0, None)
            else:
                assert loaded.snapshot_seq == seq
                assert loaded.snapshot == b.state.to_json()
            assert loaded.record.updated_at == T0 + 2
    finally:
        await store.close()


async def test_a_batch_notifies_the_runs_it_wrote_and_not_the_one_it_refused(
    pg_url: str,
) -> None:
    """With an hour-long poll only notices wake a waiter. The refused member's notice would
    arrive before the one of its run's next append, which commits after the batch."""
    watcher, writer = PostgresStore(pg_url, poll_interval=3600.0), PostgresStore(pg_url)
    try:
        bs = [await seeded(writer, f"run-{i}") for i in range(3)]
        waits = [
            asyncio.ensure_future(watcher.wait_changed(b.run_id, b.written, 45)) for b in bs[:2]
        ]
        await until_async(
            lambda: all(watcher._listener.listening(watcher.run_channel(b.run_id)) for b in bs[:2]),
            "the watcher to listen on both runs' channels",
            timeout=40,
        )
        before = watcher.notices
        outcomes: list[Any] = await asyncio.gather(
            append(writer, bs[0]), append(writer, bs[1], epoch=5), append(writer, bs[2]),
            return_exceptions=True,
        )  # fmt: skip
        assert writer.group.batches == 1
        assert isinstance(outcomes[1], Fenced)
        assert await waits[0] == bs[0].written + 1
        assert await append(writer, bs[1]) == bs[1].written + 1  # alone, after the batch
        assert await waits[1] == bs[1].written + 1
        # A waiter may return on a re-read (the listener re-reads the channels it just began
        # hearing again) before its notice is in: wait for both, then for any stray one
        # (they come in commit order on one connection, so one would be here by then).
        await until_async(lambda: watcher.notices >= before + 2, "both notices", timeout=10)
        await asyncio.sleep(0.2)
        assert watcher.notices == before + 2  # run-0's and run-1's own; run-2 is not heard
    finally:
        await watcher.close()
        await writer.close()


async def test_a_batch_announces_a_member_that_became_claimable(pg_url: str) -> None:
    """A member that leaves its run claimable while nobody holds it (here a run requeued by
    a caller, not a worker) is announced on the claimable channel, as alone; a member whose
    run a worker holds is not. Only that channel is listened to: every notice is one."""
    watcher, writer = PostgresStore(pg_url, poll_interval=3600.0), PostgresStore(pg_url)
    try:
        free, held = [await seeded(writer, f"run-{i}") for i in range(2)]
        epoch = await writer.claim(held.run_id, owner="w", now=T0, ttl=3600)
        await watcher.wait_claimable(timeout=10)  # starts listening; connecting wakes it
        await until_async(lambda: watcher.listening, "the watcher to listen", timeout=40)
        await watcher.wait_claimable(timeout=0)
        before = watcher.notices
        waiting = asyncio.ensure_future(watcher.wait_claimable(timeout=3600))

        async def requeue() -> int:
            free.written = await writer.append(
                free.run_id, [failed(1)], expected_seq=free.written, epoch=0,
                status="queued", now=T0,
            )  # fmt: skip
            return free.written

        await asyncio.gather(requeue(), append(writer, held, epoch=epoch))
        assert writer.group.batches == 1
        await waiting
        await requeue()  # alone, after the batch: its notice comes after the batch's
        await until_async(lambda: watcher.notices >= before + 2, "both notices", timeout=40)
        assert watcher.notices == before + 2
    finally:
        await watcher.close()
        await writer.close()


async def _lock_waiters(conn: Any, n: int) -> None:
    """Until ``n`` statements of this database wait for a lock (a batch stuck on a row).
    ``conn`` autocommits: inside a transaction ``pg_stat_activity`` is read once."""

    async def waiting() -> bool:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND datname = current_database()"
        )
        return bool((await cur.fetchone() or (0,))[0] >= n)

    await until_async(waiting, f"{n} statements to wait for a lock", timeout=30, every=0.01)


async def test_appends_go_out_as_more_batches_while_others_wait_on_the_server(
    pg_url: str,
) -> None:
    """While batches wait on the server (one of each one's runs locked by another
    connection), the appends made meanwhile go out as a batch of their own, on another
    connection of the pool, and return without waiting for those: a batch's round trip no
    longer holds up the appends made during it (``GroupCommit.width``). Three batches wait
    at once here, and a fourth goes out and returns. Nothing is timed: the waiting batches
    cannot return before the locks are released, which happens after the fourth returned
    (the ``wait_for`` is a deadlock guard, reached only when it waits for them)."""
    import psycopg

    store = PostgresStore(pg_url, lock_timeout=60.0, statement_timeout=60.0)
    try:
        bs = [await seeded(store, f"run-{i}") for i in range(8)]
        blocker = await psycopg.AsyncConnection.connect(pg_url)
        watch = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
        async with watch, blocker, blocker.transaction():
            await blocker.execute(
                "SELECT 1 FROM runs WHERE run_id = ANY(%s) FOR UPDATE",
                ([bs[0].run_id, bs[2].run_id, bs[4].run_id],),
            )
            waiting = []
            for i in (0, 2, 4):
                waiting.append(asyncio.gather(append(store, bs[i]), append(store, bs[i + 1])))
                await _lock_waiters(watch, len(waiting))  # until this batch is stuck
            last = asyncio.gather(append(store, bs[6]), append(store, bs[7]))
            assert await asyncio.wait_for(last, 30) == [bs[6].written + 1, bs[7].written + 1]
            assert not any(w.done() for w in waiting)
        for i, w in zip((0, 2, 4), waiting, strict=True):
            assert await w == [bs[i].written + 1, bs[i + 1].written + 1]
        assert store.group.batches == 4
        for b in bs:
            assert (await store.get_run(b.run_id)).last_seq == b.written + 1
    finally:
        await store.close()


@pytest.mark.parametrize("earlier", ["fails", "commits"])
async def test_a_runs_later_append_never_commits_ahead_of_its_earlier_one(
    pg_url: str, earlier: str
) -> None:
    """Batches on the wire together never commit a run's later append as though an earlier
    one had committed that did not. Run 0's first append goes out in a batch that updates
    its row and then waits: another connection is inserting the very event row it writes
    (uncommitted). Run 0's next append, sent meanwhile in a batch of its own, is checked
    against the run's committed row, which still ends where the first began: refused
    (``Conflict``) while the first is still on the wire, its batch's other member committed.
    Then the other connection commits (the first batch fails as a whole on the unique index
    and is written again member by member: run 0's refused, run 1's committed) or rolls back
    (the first batch commits); either way run 0's log holds nothing of the later append."""
    import psycopg

    store = PostgresStore(pg_url, lock_timeout=60.0, statement_timeout=60.0)
    try:
        x, y, z = [await seeded(store, f"run-{i}") for i in range(3)]
        blocker = await psycopg.AsyncConnection.connect(pg_url)
        watch = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
        async with watch, blocker:
            await blocker.execute(
                "INSERT INTO events (run_no, run_id, seq, kind, version, turn_index,"
                " tool_call_id, data, created_at) SELECT run_no, run_id, seq + 1, kind,"
                " version, NULL, NULL, data, created_at FROM events"
                " WHERE run_id = %s AND seq = %s",
                (x.run_id, x.written),
            )
            first = asyncio.gather(append(store, x), append(store, y), return_exceptions=True)
            await _lock_waiters(watch, 1)
            got_later = await asyncio.gather(
                store.append(
                    x.run_id, [failed(2)], expected_seq=x.written + 1, epoch=0,
                    status=x.status, now=T0,
                ),
                append(store, z),
                return_exceptions=True,
            )  # fmt: skip
            assert isinstance(got_later[0], Conflict), got_later
            assert "expected to append after seq" in str(got_later[0])
            assert got_later[1] == z.written + 1
            assert not first.done()
            await (blocker.commit() if earlier == "fails" else blocker.rollback())
            got_first = await first
        assert store.group.batches == (1 if earlier == "fails" else 2)  # one that committed
        assert got_first[1] == y.written + 1
        if earlier == "fails":
            assert isinstance(got_first[0], Conflict)  # its event's place was taken
            assert (await store.get_run(x.run_id)).last_seq == x.written
        else:
            assert got_first[0] == x.written + 1
            events = [e.event for e in await store.read_events(x.run_id, x.written)]
            assert events == [failed(1)]
    finally:
        await store.close()
