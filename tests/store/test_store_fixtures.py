"""Stores written by earlier stead code still load: a SQLite file and a PostgreSQL schema.

``fixtures/`` holds what the store of commit 8ddcde7 wrote (``fixtures/make_old_stores.py``):
SQLite packed snapshots with zlib, PostgreSQL kept them as JSON text, neither with a checksum.
Both now pack them the same way (zlib over the checksummed text), and PostgreSQL's migration
0002 turns the old text into bytes that still decode. A snapshot without a checksum cannot
show it is the one written, so the store does not rely on it: an old run loads from its log,
and its next snapshot is checksummed. Never regenerate these files to make this pass: they
are what deployments hold.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _builders import T0, RunBuilder, fold_log

from stead.core.events import TurnStarted
from stead.runtime import OwnedRun
from stead.store import Store
from stead.store.postgres import PostgresStore
from stead.store.sql._migrations import DIALECTS, migrations, render, statements
from stead.store.sqlite import SQLiteStore

pytestmark = pytest.mark.timeout(60)

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "expected-8ddcde7.json").read_text())


Raw = Callable[[str], bytes | None]
"""The snapshot column of a run as the database holds it (None without a row)."""


def _old_snapshot(data: bytes | None) -> Any:
    """A snapshot row as 8ddcde7 read it: zlib-compressed JSON, or plain JSON text."""
    if data is None:
        return None
    return json.loads(data if data[:1] == b"{" else zlib.decompress(data))


async def _loads_as_written(store: Store, raw: Raw, expected: dict[str, Any]) -> None:
    """Every run's row and log read back as the old store wrote them, its snapshot row still
    decodes to what was written but is not relied on (no checksum); the state folds to what
    the whole log folds to; and the store writes on, with a checksummed snapshot it uses."""
    assert {r.run_id for r in await store.list_runs()} == set(expected)
    for run_id, want in expected.items():
        loaded = await store.load(run_id)
        assert (loaded.record.last_seq, loaded.record.status) == (want["last_seq"], want["status"])
        assert _old_snapshot(raw(run_id)) == want["snapshot"]
        assert (want["snapshot"] is None) == (want["snapshot_seq"] == 0)
        assert (loaded.snapshot_seq, loaded.snapshot) == (0, None)
        assert len(loaded.tail) == want["last_seq"]
        log = [s.event for s in await store.read_events(run_id)]
        assert len(log) == want["last_seq"]
        state, _ = await OwnedRun.load_state(store, run_id)
        assert state.to_json() == fold_log(log).to_json()
    # The store writes on: one more event, and a new snapshot (packed) over the old one.
    old = await store.load("snap-tail")
    log = [s.event for s in await store.read_events("snap-tail")]
    more = TurnStarted(turn_index=fold_log(log).turn_index + 1)
    state = fold_log([*log, more])
    assert state.status is not None
    seq = await store.append(
        "snap-tail",
        [more],
        expected_seq=old.record.last_seq,
        epoch=old.record.epoch,
        status=state.status.value,
        now=T0 + 9,
        snapshot=(state.seq, state.to_json()),
    )
    new = await store.load("snap-tail")
    assert (new.snapshot_seq, new.snapshot, new.tail) == (seq, state.to_json(), [])


async def test_a_sqlite_file_written_by_earlier_code_still_loads(tmp_path: Path) -> None:
    copy = tmp_path / "old.db"
    shutil.copy(FIXTURES / "sqlite-8ddcde7.db", copy)

    def raw(run_id: str) -> bytes | None:
        db = sqlite3.connect(copy)
        try:
            row = db.execute(
                "SELECT CAST(state AS BLOB) FROM snapshots WHERE run_id = ?", (run_id,)
            ).fetchone()
        finally:
            db.close()
        return None if row is None else bytes(row[0])

    store = SQLiteStore(copy)
    try:
        await _loads_as_written(store, raw, EXPECTED)
    finally:
        await store.close()


async def test_a_postgres_schema_written_by_earlier_code_still_loads(pg_url: str) -> None:
    dump = json.loads((FIXTURES / "postgres-8ddcde7.json").read_text())
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for sql in dump["migrations"].values():
            for statement in statements(sql):
                conn.execute(statement.encode())
        for table, content in dump["tables"].items():
            if table == "schema_migrations":
                conn.execute(
                    "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL)"
                )
            columns = ", ".join(content["columns"])
            marks = ", ".join(["%s"] * len(content["columns"]))
            for row in content["rows"]:
                conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})".encode(), row)
    assert dump["expected"] == EXPECTED  # the same runs, written the same way

    def raw(run_id: str) -> bytes | None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT state FROM snapshots WHERE run_id = %s", (run_id,)
            ).fetchone()
        return None if row is None else bytes(row[0])

    store = PostgresStore(pg_url)
    try:
        await _loads_as_written(store, raw, EXPECTED)
    finally:
        await store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == [v for v, _, _ in migrations("postgres")]  # 0002 and every later one


def test_every_migration_has_a_version_of_its_own() -> None:
    """Two branches can each add a ``0003_*.sql``: the runner would then fail on a fresh
    store with a bare IntegrityError. Each dialect's versions are unique (the loader says
    which file stands twice), and the two dialects hold the same versions under the same
    names where the source is shared."""
    versions = {d: [v for v, _, _ in migrations(d)] for d in DIALECTS}
    for numbers in versions.values():
        assert len(numbers) == len(set(numbers)), numbers
    assert versions["sqlite"] == versions["postgres"]


# sha256 of each dialect's file as it was before the shared sources (its bytes as applied).
APPLIED = {
    ("sqlite", 1): "7c313d08a2b533b83275862a407b234560f10ed1647375fa7c5919c1f4867106",
    ("postgres", 1): "8e9a33cd9f3912572548e1d2e502203f3c1e5c456ea9d2589fcc38cecdcb1611",
    ("sqlite", 3): "41d1f5ef06065d534e40f3595b2170d5928222afc9bcb81e45cf9f4aac758b28",
    ("postgres", 3): "f90bf3acba9449e38dd815ce93169f7e18a50e2e43c2acd0f722a0e64cececa9",
    ("sqlite", 4): "ae0dd9424e49bab2f64fc66aff1153ec04c5c86b70e35c28e4cea516471b06a2",
    ("postgres", 4): "db1965c0e528d05321be25a895c8af83f9f0f42447e5d72c8b78d863c94cf385",
}


def test_a_shared_migration_renders_the_text_each_dialect_applied() -> None:
    """An applied migration's text must not change: the one source of 0001, 0003 and 0004
    renders, for each dialect, exactly the bytes of the file that dialect had."""
    import hashlib

    for (dialect, version), digest in APPLIED.items():
        (sql,) = [sql for v, _, sql in migrations(dialect) if v == version]
        assert hashlib.sha256(sql.encode()).hexdigest() == digest, (dialect, version)


def test_a_dialect_mark_that_names_no_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown dialect mark"):
        render("@mysql CREATE TABLE t (x INTEGER);\n", "sqlite")
    assert render("a {BIGINT}{WITHOUT_ROWID};\n@postgres\n@sqlite b\n", "postgres") == (
        "a BIGINT;\n\n"
    )


# -- a store written by the code before migration 0007 -----------------------------------
#
# ``fixtures/*-5503f36.*`` hold the same three runs as written by commit 5503f36: SQLite's
# events in 0001's WITHOUT ROWID table, PostgreSQL's event data as text, snapshots with their
# checksum. Migration 0007 moves the rows (a rowid table; bytes); everything reads back as
# written, the checksummed snapshots are still relied on, and the store writes on, a large
# row compressed beside the old ones.

TODAY = "5503f36"
EXPECTED_TODAY: dict[str, Any] = json.loads((FIXTURES / f"expected-{TODAY}.json").read_text())


async def _migrated_loads_as_written(store: Store) -> None:
    assert {r.run_id for r in await store.list_runs()} == set(EXPECTED_TODAY)
    for run_id, want in EXPECTED_TODAY.items():
        loaded = await store.load(run_id)
        assert (loaded.record.last_seq, loaded.record.status) == (want["last_seq"], want["status"])
        assert (loaded.snapshot_seq, loaded.snapshot) == (want["snapshot_seq"], want["snapshot"])
        log = [s.event for s in await store.read_events(run_id)]
        assert len(log) == want["last_seq"]
        state, _ = await OwnedRun.load_state(store, run_id)
        assert state.to_json() == fold_log(log).to_json()
        assert await OwnedRun.verify(store, run_id) == want["last_seq"]
    # The store writes on: a result of 4 KB (stored compressed) after the migrated rows.
    b = RunBuilder("after-0007")
    await b.create(store, now=T0 + 10)
    b.start()
    b.tool_turn(result_size=4000)
    await b.flush(store, now=T0 + 11)
    assert [s.event for s in await store.read_events("after-0007")] == b.log


async def test_a_sqlite_file_written_before_0007_migrates_and_loads(tmp_path: Path) -> None:
    copy = tmp_path / "old.db"
    shutil.copy(FIXTURES / f"sqlite-{TODAY}.db", copy)
    store = SQLiteStore(copy)
    try:
        await _migrated_loads_as_written(store)
    finally:
        await store.close()
    db = sqlite3.connect(copy)
    try:
        (table,) = db.execute("SELECT sql FROM sqlite_schema WHERE name = 'events'").fetchone()
        kinds = db.execute(
            "SELECT typeof(data), count(*) FROM events WHERE run_id = 'after-0007' GROUP BY 1"
        ).fetchall()
    finally:
        db.close()
    assert "WITHOUT ROWID" not in table  # rows of a few KB stay on their page
    assert dict(kinds)["blob"] == 1  # the large result, compressed; the rest is text


async def test_a_postgres_schema_written_before_0007_migrates_and_loads(pg_url: str) -> None:
    dump = json.loads((FIXTURES / f"postgres-{TODAY}.json").read_text())
    _restore(pg_url, dump)
    assert dump["expected"] == EXPECTED_TODAY
    store = PostgresStore(pg_url)
    try:
        await _migrated_loads_as_written(store)
    finally:
        await store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'events' "
            "AND column_name = 'data' AND table_schema = current_schema()"
        ).fetchone()
        big = conn.execute(
            "SELECT count(*) FROM events WHERE run_id = 'after-0007' AND get_byte(data, 0) = 120"
        ).fetchone()
    assert row == ("bytea",)
    assert big == (1,)  # 'x': the zlib stream of the large result


def _restore(pg_url: str, dump: dict[str, Any]) -> None:
    """A schema as ``make_old_stores.py`` dumped it: its migrations, then its rows (bytes
    were dumped as ``{"bytes": hex}``)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
        )
        for sql in dump["migrations"].values():
            for statement in statements(sql):
                conn.execute(statement.encode())
        for table, content in dump["tables"].items():
            columns = ", ".join(content["columns"])
            marks = ", ".join(["%s"] * len(content["columns"]))
            for row in content["rows"]:
                values = [bytes.fromhex(v["bytes"]) if isinstance(v, dict) else v for v in row]
                conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})".encode(), values)


# -- a PostgreSQL store written by the code before migration 0009 ------------------------
#
# ``fixtures/*-b0428fb.*``: the same three runs and a long one ("snap-long", 81 messages in
# its snapshot) as main wrote them at b0428fb: events keyed by (run_id, seq), snapshots whole
# in their row. Migration 0009 numbers the runs and their events and adds the snapshots'
# pieces; the old whole snapshots are still relied on, and the next one is stored in pieces.

B0428FB = "b0428fb"


async def test_a_postgres_schema_written_before_0009_migrates_and_loads(pg_url: str) -> None:
    dump = json.loads((FIXTURES / f"postgres-{B0428FB}.json").read_text())
    expected = json.loads((FIXTURES / f"expected-{B0428FB}.json").read_text())
    _restore(pg_url, dump)
    assert dump["expected"] == expected
    store = PostgresStore(pg_url)
    try:
        assert {r.run_id for r in await store.list_runs()} == set(expected)
        for run_id, want in expected.items():
            loaded = await store.load(run_id)
            assert (loaded.record.last_seq, loaded.record.status) == (
                want["last_seq"],
                want["status"],
            )
            assert (loaded.snapshot_seq, loaded.snapshot) == (
                want["snapshot_seq"],
                want["snapshot"],
            )
            log = [s.event for s in await store.read_events(run_id)]
            state, _ = await OwnedRun.load_state(store, run_id)
            assert state.to_json() == fold_log(log).to_json()
            assert await OwnedRun.verify(store, run_id) == want["last_seq"]
        # The long run writes on; its next snapshot is stored in pieces and read back whole.
        b = RunBuilder("snap-long")
        b.state, _ = await OwnedRun.load_state(store, "snap-long")
        b.log = [s.event for s in await store.read_events("snap-long")]
        b.written, b.next_turn = len(b.log), b.state.turn_index + 1
        b.tool_turn()
        await b.flush(store, now=T0 + 20, snapshot=True)
        loaded = await store.load("snap-long")
        assert (loaded.snapshot_seq, loaded.snapshot) == (b.written, b.state.to_json())
    finally:
        await store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        pieces = conn.execute("SELECT count(*) FROM snapshot_chunks").fetchone()
        key = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'events_pkey'"
            " AND schemaname = current_schema()"
        ).fetchone()
        numbered = conn.execute(
            "SELECT count(*) FROM events e JOIN runs r ON r.run_no = e.run_no"
            " AND r.run_id = e.run_id"
        ).fetchone()
    assert pieces == (3,)  # 2 of the messages, 1 of the turns' usage
    assert key is not None and "(run_no, seq)" in key[0]
    assert numbered == (sum(w["last_seq"] for w in expected.values()) + 4,)  # and one turn
