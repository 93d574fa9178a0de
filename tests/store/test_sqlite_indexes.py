"""SQLite: the runs indexes stay off the append path (migration 0002), and a store made by
an older stead is migrated in place.

An append under a lease changes the run's status and updated_at; with 0001's index on
(status, updated_at) every step also rewrote an index page. These tests read the pages each
commit writes from the WAL itself, so they fail if an index on the append path comes back.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
from collections import Counter
from pathlib import Path

from _builders import T0, RunBuilder, call_id, created, result, tool_turn

from stead.core.events import RunStarted
from stead.store.sql._store import migrations
from stead.store.sqlite import SQLiteStore


def _btrees_written(path: Path) -> set[str]:
    """Names of the tables and indexes that own a page written to the WAL so far."""
    data = (path.parent / (path.name + "-wal")).read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    pages, offset = set(), 32
    while offset + 24 + page_size <= len(data):
        pages.add(struct.unpack(">I", data[offset : offset + 4])[0])
        offset += 24 + page_size
    with sqlite3.connect(path) as db:
        owners = dict(db.execute("SELECT pageno, name FROM dbstat"))
    return {owners.get(p, "?") for p in pages}


async def test_appends_under_a_lease_write_no_runs_index(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        await store.create_run(created("run-1"), now=T0)
        epoch = await store.claim("run-1", owner="w", now=T0, ttl=60)
        seq = await store.append(
            "run-1",
            [RunStarted(owner="w", epoch=epoch)],
            expected_seq=1,
            epoch=epoch,
            status="running",
            now=T0,
        )
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for turn in range(3):  # status flips running <-> awaiting_tool on every append
            for batch, status in (
                (tool_turn("run-1", turn, results=False), "awaiting_tool"),
                (tool_turn("run-1", turn)[-1:], "running"),
            ):
                seq = await store.append(
                    "run-1", batch, expected_seq=seq, epoch=epoch, status=status, now=T0 + seq
                )
        written = _btrees_written(path)
        assert "events" in written and "runs" in written
        assert not written & {"runs_unleased", "runs_leased", "runs_by_status"}, written
        # Claiming and releasing do move the run between the two indexes.
        await store.release("run-1", owner="w", epoch=epoch)
        assert "runs_unleased" in _btrees_written(path)
    finally:
        await store.close()


async def test_a_store_from_before_0002_is_migrated_and_its_runs_found(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    version, name, init = migrations("sqlite")[0]
    with sqlite3.connect(path) as db:
        db.executescript(init)
        db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, name))
        db.execute(
            "INSERT INTO runs (run_id, agent, status, last_seq, created_at, updated_at) "
            "VALUES ('run-old', 'a', 'queued', 0, 1, 1)"
        )
    store = SQLiteStore(path)
    try:
        indexes = {r[0] for r in store._db.execute("SELECT name FROM sqlite_master")}
        assert {"runs_unleased", "runs_leased"} <= indexes
        assert "runs_by_status" not in indexes
        assert [r.run_id for r in await store.list_runs(status="queued")] == ["run-old"]
        (claim,) = await store.claim_next(owner="w", now=T0, ttl=60)
        assert claim.run_id == "run-old"
    finally:
        await store.close()


def _pages_by_btree(path: Path) -> Counter[str]:
    """WAL frames written so far, counted by the table or index that owns their page."""
    data = (path.parent / (path.name + "-wal")).read_bytes()
    page_size = struct.unpack(">I", data[8:12])[0]
    pages, offset = [], 32
    while offset + 24 + page_size <= len(data):
        pages.append(struct.unpack(">I", data[offset : offset + 4])[0])
        offset += 24 + page_size
    with sqlite3.connect(path) as db:
        owners = dict(db.execute("SELECT pageno, name FROM dbstat"))
    return Counter(owners.get(p, "?") for p in pages)


async def _strict_run(store: SQLiteStore, run_id: str, turns: int) -> int:
    """A run written as the strict mode writes it: its creation, its start, then a commit a
    step (the reply with its intent; the result). Returns its commits."""
    b = RunBuilder(run_id)
    await b.create(store, now=T0)
    b.start()
    await b.flush(store)
    for turn in range(turns):
        b.add(*tool_turn(run_id, turn, results=False))
        await b.flush(store)
        b.add(result(turn, call_id(turn, 0)))
        await b.flush(store)
    return 2 + 2 * turns


async def test_a_run_appends_at_the_edge_of_the_events_index(tmp_path: Path) -> None:
    """Migration 0008: the events index is keyed by the run's number, which grows with each
    run created, so the newest run's entries go to the index's right-hand edge: one page a
    commit. Keyed by the random run id (0007), a run's entries went among other runs' into a
    page SQLite's balancing had left full, and most commits rebalanced 3-4 pages of it (41-57
    of the 109-126 pages a strict run of bench/overhead.py wrote on a store of 15 runs)."""
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        ids = [f"run_{hashlib.sha256(str(i).encode()).hexdigest()[:32]}" for i in range(16)]
        for run_id in ids[:15]:  # random-looking ids, in no order, as uuid4's are
            await _strict_run(store, run_id, 10)
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        commits = await _strict_run(store, ids[15], 10)
        pages = _pages_by_btree(path)
        # One page a commit, and a few new ones as the edge fills (0007's index: 35 here).
        assert pages["events_by_seq"] <= commits + 4, pages
        assert pages["events_one_result"] <= 10 + 1, pages  # one a result (0007: 13)
    finally:
        await store.close()


async def test_a_run_written_at_its_end_adds_a_page_or_two_to_the_events_index(
    tmp_path: Path,
) -> None:
    """The effects mode writes a run of read_only tools in one commit at its end (44 events
    in bench/overhead.py). Its keys at the edge of the two run_no-keyed indexes take a page
    each; among other runs' keys (0007) they split a full page of one index or both and
    rebalanced its siblings."""
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    try:
        ids = [f"run_{hashlib.sha256(str(i).encode()).hexdigest()[:32]}" for i in range(31)]
        for run_id in ids[:30]:
            await _strict_run(store, run_id, 10)
        b = RunBuilder(ids[30])
        await b.create(store, now=T0)
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        b.start()
        for _ in range(10):
            b.tool_turn()
        b.final_turn()
        await b.flush(store)
        pages = _pages_by_btree(path)
        # The run's keys in the two events indexes: a page each (0007: 5-9 for ids like these).
        assert pages["events_by_seq"] + pages["events_one_result"] <= 3, pages
    finally:
        await store.close()
