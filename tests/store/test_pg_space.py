"""PostgreSQL keeps a run's bytes on disk near its content (migration 0009).

A snapshot rewritten whole every few hundred events left every old version's TOAST chunks
dead until a vacuum; a long state's lists are now stored in pieces, each once
(store/postgres/_chunks.py). Events are indexed by the run's number, not its random id. Sizes are
counted by the server (``pg_relation_size``, autovacuum off for the tables), never timed.
"""

from __future__ import annotations

import random
import zlib

import psycopg
import pytest
from _builders import T0, RunBuilder, result, seeded

from stead.core.fold import RunState
from stead.runtime import OwnedRun
from stead.store.postgres import PostgresStore
from stead.store.sql._base import snapshot_state
from stead.store.sql._migrations import migrations, statements
from stead.store.sql._store import pack

pytestmark = pytest.mark.timeout(60)


def sql(url: str, statement: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement.encode(), params)
        return cur.fetchall() if cur.description else []


def turns(b: RunBuilder, n: int) -> None:
    """``n`` tool turns whose results are ~1 KB that varies (compresses as tool output)."""
    for _ in range(n):
        turn = b.next_turn
        (call,) = [e.tool_call_id for e in b.tool_turn(results=False)[2:]]
        text = random.Random(turn).randbytes(500).hex()
        b.add(result(turn, call, content=text))


def row_state(url: str, run_id: str) -> dict[str, object] | None:
    [(raw,)] = sql(url, "SELECT state FROM snapshots WHERE run_id = %s", run_id)
    return snapshot_state(zlib.decompress(bytes(raw)).decode())


async def test_a_long_state_is_stored_in_pieces_each_written_once(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        b = await seeded(store, "run-1", turns=0)
        turns(b, 40)  # 81 messages, 40 turns of usage: 2 pieces and 1
        await b.flush(store, snapshot=True)
        head = row_state(pg_url, "run-1")
        assert head is not None and list(head["chunks"]) == ["messages", "turn_usage"]  # type: ignore[call-overload]
        assert len(head["messages"]) == 81 - 2 * 32  # type: ignore[arg-type]
        first = sql(pg_url, "SELECT digest, xmin::text FROM snapshot_chunks ORDER BY 1")
        assert len(first) == 3
        loaded = await store.load("run-1")
        assert (loaded.snapshot_seq, loaded.snapshot, loaded.tail) == (
            b.written,
            b.state.to_json(),
            [],
        )

        turns(b, 40)  # 161 messages, 80 turns: 5 pieces and 2; the first three kept as written
        await b.flush(store, snapshot=True)
        now = sql(pg_url, "SELECT digest, xmin::text FROM snapshot_chunks ORDER BY 1")
        assert len(now) == 7 and set(first) <= set(now)
        loaded = await store.load("run-1")
        assert (loaded.snapshot_seq, loaded.snapshot) == (b.written, b.state.to_json())
        state, covered = await OwnedRun.load_state(store, "run-1")
        assert (state.to_json(), covered) == (b.state.to_json(), b.written)
        assert await OwnedRun.verify(store, "run-1") == b.written
    finally:
        await store.close()


async def test_rewriting_a_long_runs_snapshot_leaves_little_behind(pg_url: str) -> None:
    """Twenty snapshots of a growing run: what the snapshot tables hold (live and dead, no
    vacuum) stays within twice the live snapshot, where whole rewrites left ten times it."""
    store = PostgresStore(pg_url)
    try:
        tables = "(to_regclass('snapshots'), to_regclass('snapshot_chunks'))"
        for (t,) in sql(pg_url, f"SELECT relname FROM pg_class WHERE oid IN {tables}"):
            sql(pg_url, f"ALTER TABLE {t} SET (autovacuum_enabled = false,"
                " toast.autovacuum_enabled = false)")  # fmt: skip
        b = await seeded(store, "run-1", turns=0)
        for _ in range(20):
            turns(b, 16)
            await b.flush(store, snapshot=True)
        [(held,)] = sql(
            pg_url,
            "SELECT sum(pg_total_relation_size(to_regclass(t)))::bigint FROM unnest(%s::text[]) t",
            ["snapshots", "snapshot_chunks"],
        )
        live = len(pack(b.state.to_json()))
        assert isinstance(held, int) and held < 2 * live + 64 * 1024, (held, live)
        assert (await store.load("run-1")).snapshot == b.state.to_json()
    finally:
        await store.close()


async def test_a_missing_piece_makes_the_snapshot_unused_never_wrong(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        b = await seeded(store, "run-1", turns=0)
        turns(b, 40)
        await b.flush(store, snapshot=True)
        b.final_turn()
        await b.flush(store)
        sql(
            pg_url,
            "DELETE FROM snapshot_chunks WHERE ctid = (SELECT min(ctid) FROM snapshot_chunks)",
        )
        state, covered = await OwnedRun.load_state(store, "run-1")
        assert (state.to_json(), covered) == (b.state.to_json(), 0)  # the whole log, folded
        # A piece whose bytes are not those its digest names is as good as missing.
        await store.close()
        store = PostgresStore(pg_url)
        b2 = await seeded(store, "run-2", turns=0)
        turns(b2, 40)
        await b2.flush(store, snapshot=True)
        sql(pg_url, "UPDATE snapshot_chunks SET data = %s WHERE run_id = 'run-2'",
            zlib.compress(b"[]"))  # fmt: skip
        state, covered = await OwnedRun.load_state(store, "run-2")
        assert (state.to_json(), covered) == (b2.state.to_json(), 0)
    finally:
        await store.close()


async def test_events_are_indexed_by_the_runs_number(pg_url: str) -> None:
    """The (run, seq) index of 2,000 events: ~28 bytes an entry (a 16-byte key), where the
    random run id made it ~70."""
    store = PostgresStore(pg_url)
    try:
        b = await seeded(store, "run_" + "5f0c" * 8, turns=0)  # as long as a real run id
        for _ in range(500):
            turns(b, 1)
            await b.flush(store)
        assert b.written == 2002
        [(size,)] = sql(pg_url, "SELECT pg_relation_size('events_pkey')")
        assert isinstance(size, int) and size < 2000 * 36 + 16384, size
        later = await seeded(store, "run_" + "0000" * 8, turns=1)
        numbers = sql(pg_url, "SELECT run_id, run_no FROM runs ORDER BY run_no")
        assert [r for r, _ in numbers] == [b.run_id, later.run_id]  # in order of creation
        assert [e.event for e in await store.read_events(later.run_id)] == later.log
    finally:
        await store.close()


async def test_a_schema_written_before_0009_loads_and_snapshots_in_pieces_after(
    pg_url: str,
) -> None:
    """A store as main wrote it before 0009: a long run's snapshot whole in its row. After
    the migration it is still relied on; the run's next snapshot is written in pieces."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
        )
        for version, name, text in migrations("postgres"):
            if version < 9:
                for statement in statements(text):
                    conn.execute(statement.encode())
                conn.execute("INSERT INTO schema_migrations VALUES (%s, %s)", (version, name))
    b = RunBuilder("run-old")
    b.start()
    turns(b, 40)
    old = _rows(b)
    sql(pg_url, "INSERT INTO runs (run_id, agent, status, last_seq, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s, %s)", b.run_id, b.created.agent, b.status, len(b.log),
        T0, T0)  # fmt: skip
    for seq, (kind, version, turn, call, data) in enumerate(old, start=1):
        sql(pg_url, "INSERT INTO events (run_id, seq, kind, version, turn_index,"
            " tool_call_id, data, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            b.run_id, seq, kind, version, turn, call, data, T0)  # fmt: skip
    sql(pg_url, "INSERT INTO snapshots (run_id, seq, version, state) VALUES (%s, %s, %s, %s)",
        b.run_id, len(b.log), 4, pack(b.state.to_json()))  # fmt: skip

    store = PostgresStore(pg_url)
    try:
        loaded = await store.load(b.run_id)
        assert (loaded.snapshot_seq, loaded.snapshot) == (len(b.log), b.state.to_json())
        b.written, b.pending = len(b.log), []
        turns(b, 40)
        await b.flush(store, snapshot=True)
        assert len(sql(pg_url, "SELECT 1 FROM snapshot_chunks")) == 7
        state, covered = await OwnedRun.load_state(store, b.run_id)
        assert (state.to_json(), covered) == (b.state.to_json(), b.written)
        assert RunState.from_json(state.to_json()).seq == b.written
        # The old run's events were numbered with it; a new run's number comes after it.
        new = await seeded(store, "run-new")
        assert [e.event for e in await store.read_events(new.run_id)] == new.log
        rows = sql(
            pg_url,
            "SELECT r.run_id, count(*) FROM runs r JOIN events e ON e.run_no = r.run_no"
            " GROUP BY r.run_id, r.run_no ORDER BY r.run_no",
        )
        assert rows == [(b.run_id, b.written), (new.run_id, new.written)]
    finally:
        await store.close()


def _rows(b: RunBuilder) -> list[tuple[str, int, int | None, str | None, str | bytes]]:
    """The log's rows as the store writes them (event data as UTF-8 bytes)."""
    from stead.store.sql._base import event_row
    from stead.store.sql._store import utf8_rows

    return utf8_rows([event_row(e) for e in b.log])
