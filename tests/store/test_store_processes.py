"""Several real processes on one store: claims, racing appends, migrations, and a SIGKILL in
the middle of a commit. No threads standing in for processes, no mocks."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import signal
import sqlite3
import sys
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
from _backends import CHILD, Backend
from _builders import T0, RunBuilder, created, fold_log, result, to_wire

from stead.core.events import ModelCallFailed, TurnStarted
from stead.store import Store
from stead.store.sql._store import migrations

pytestmark = pytest.mark.timeout(60)

PIPE = asyncio.subprocess.PIPE


def _env(crash_at: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
    if crash_at is not None:
        env["STEAD_CRASH_AT"] = crash_at
    return env


async def _spawn(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), *args, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=env or _env()
    )


def _release(go: Path) -> None:
    go.touch()


def _wal_bytes(backend: Backend) -> int:
    return Path(backend.url.removeprefix("sqlite:///") + "-wal").stat().st_size


async def _together(go: Path, argvs: Sequence[Sequence[str]]) -> list[dict]:
    """Start one child per argv, release them at once, and return each one's JSON result."""
    procs = [await _spawn(*argv) for argv in argvs]
    try:
        for p in procs:
            assert p.stdout is not None and p.stderr is not None
            line = await p.stdout.readline()
            assert line == b"ready\n", (line, await p.stderr.read())
        _release(go)  # every child is set up and waiting: let them all go
        outputs = [await p.communicate() for p in procs]
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    results = []
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err.decode()
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    return results


async def test_eight_processes_claim_twenty_runs_each_run_won_once(
    store: Store, backend: Backend, tmp_path: Path
) -> None:
    run_ids = [f"run-{i:02d}" for i in range(20)]
    for rid in run_ids:
        await store.create_run(created(rid), now=T0)
    owners = [f"proc-{k}" for k in range(8)]

    results = await _together(
        tmp_path / "go",
        [["claim", backend.url, str(tmp_path / "go"), owner, *run_ids] for owner in owners],
    )

    winners: dict[str, list[str]] = {rid: [] for rid in run_ids}
    for r in results:
        for rid, epoch in r["won"].items():
            winners[rid].append(r["owner"])
            assert epoch == 1, (rid, r)
    assert {rid: len(w) for rid, w in winners.items()} == dict.fromkeys(run_ids, 1)
    for rid, [owner] in winners.items():
        rec = await store.get_run(rid)
        assert (rec.lease_owner, rec.epoch) == (owner, 1)


async def test_four_processes_appending_to_one_run_lose_and_duplicate_nothing(
    store: Store, backend: Backend, tmp_path: Path
) -> None:
    b = RunBuilder("run-1")
    await b.create(store)
    b.start()
    b.add(TurnStarted(turn_index=0))  # a model call in progress: failures may pile up
    base = await b.flush(store)
    workers, each = [f"w{k}" for k in range(4)], 50

    results = await _together(
        tmp_path / "go",
        [["append", backend.url, str(tmp_path / "go"), w, "run-1", str(each)] for w in workers],
    )

    log = await store.read_events("run-1")
    assert [s.seq for s in log] == list(range(1, base + len(workers) * each + 1))
    appended = [s.event for s in log[base:]]
    assert all(isinstance(e, ModelCallFailed) for e in appended)
    tags = [e.message for e in appended if isinstance(e, ModelCallFailed)]
    assert len(tags) == len(set(tags)) == len(workers) * each
    for w in workers:  # each worker's own events keep its order
        mine = [int(t.split(":")[1]) for t in tags if t.startswith(f"{w}:")]
        assert mine == list(range(each))
    assert (await store.get_run("run-1")).last_seq == len(log)
    fold_log([s.event for s in log])  # still a valid log
    print(f"\nconflicts retried per worker: {[r['conflicts'] for r in results]}")


# -- migrations ------------------------------------------------------------------------


async def test_opening_a_store_twice_migrates_once(backend: Backend) -> None:
    applied = [(v, name) for v, name, _ in migrations(backend.name)]
    assert applied[0] == (1, "init")
    first = backend.open()
    second = backend.open()
    assert backend.sql("SELECT version, name FROM schema_migrations") == applied
    await first.create_run(created("run-1"), now=T0)
    assert (await second.get_run("run-1")).last_seq == 1
    await backend.close(first)
    await backend.close(second)

    third = backend.open()
    assert backend.sql("SELECT version, name FROM schema_migrations") == applied
    assert [r.run_id for r in await third.list_runs()] == ["run-1"]


_WAL_SWITCH_BUG = (
    "BUG: SQLiteStore.__init__ (store/sqlite/_store.py) runs PRAGMA journal_mode=WAL once, and "
    "SQLite does not call the busy handler when switching a rollback-journal file (a brand-new "
    "one) to WAL while another connection holds a lock on it: a process that opens a new store "
    "while another is still migrating it fails at once with StoreError('database is locked') "
    "instead of waiting busy_timeout. Fix: retry the PRAGMA on SQLITE_BUSY until busy_timeout"
)


async def test_opening_a_new_store_waits_for_a_writer_instead_of_failing(
    backend: Backend,
) -> None:
    if backend.name != "sqlite":
        pytest.skip("holds SQLite's file lock by hand")
    other = sqlite3.connect(
        backend.url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False
    )
    other.execute("BEGIN IMMEDIATE")  # another process, mid-way through creating the store
    release = threading.Timer(1.0, other.execute, ("COMMIT",))
    release.start()
    try:
        store = backend.open()  # must wait for the lock like any other write
    finally:
        release.join()
        other.close()
    assert backend.sql("SELECT version, name FROM schema_migrations") == [
        (v, name) for v, name, _ in migrations(backend.name)
    ]
    await store.create_run(created("run-1"), now=T0)


async def test_processes_opening_a_new_store_at_once_migrate_once(
    backend: Backend, tmp_path: Path
) -> None:
    run_ids = [f"run-{k}" for k in range(4)]
    await _together(
        tmp_path / "go",
        [["open", backend.url, str(tmp_path / "go"), rid] for rid in run_ids],
    )
    assert backend.sql("SELECT version, name FROM schema_migrations") == [
        (v, name) for v, name, _ in migrations(backend.name)
    ]
    store = backend.open()
    assert sorted(r.run_id for r in await store.list_runs()) == run_ids


async def test_sqlite_file_is_in_wal_mode(store: Store, backend: Backend) -> None:
    if backend.name != "sqlite":
        pytest.skip("SQLite only")
    assert backend.sql("PRAGMA journal_mode") == [("wal",)]


# -- durability boundary ---------------------------------------------------------------


@pytest.mark.parametrize("size", ["small", "spilled"])
async def test_sigkill_inside_the_result_commit_leaves_no_trace(
    store: Store,
    backend: Backend,
    reopen: Callable[[Store], Awaitable[Store]],
    size: str,
) -> None:
    """The child dies at ``before_result_commit`` (the store's ``before_commit`` hook, which
    every append calls): on SQLite its rows are inserted, the transaction is open, COMMIT
    never runs; on PostgreSQL the one autocommitted statement that is the write and its commit
    is never sent. "spilled" makes the batch big enough (~3 MB as stored) that SQLite writes
    uncommitted pages into the WAL before the kill; they must be ignored all the same."""
    b = RunBuilder("run-1")
    await b.create(store)
    epoch = await store.claim("run-1", owner="doomed", now=T0, ttl=60)
    b.start(owner="doomed", epoch=epoch)
    b.tool_turn(calls=2, results=False)
    before = await b.flush(store, epoch=epoch)
    # Text that does not compress: a large row is stored compressed (_base.pack_data), and a
    # run of "x" would shrink to a few KB and never reach the WAL uncommitted.
    noise = base64.b64encode(random.Random(0).randbytes(1_500_000)).decode()
    content = noise if size == "spilled" else "x" * 300
    batch = b.add(
        result(0, "call_0_0", content=content),
        result(0, "call_0_1", content=content),
        TurnStarted(turn_index=1),
    )

    child = await _spawn(
        "commit", backend.url, "run-1", str(before), str(epoch), b.status,
        env=_env("before_result_commit"),
    )  # fmt: skip
    out, err = await child.communicate(to_wire(batch).encode())
    assert child.returncode == -signal.SIGKILL, (out, err.decode())
    assert out == b"appending\n"  # it got as far as the append, and no further
    if size == "spilled" and backend.name == "sqlite":
        assert _wal_bytes(backend) > 1_000_000  # uncommitted frames really reached the WAL

    store = await reopen(store)
    rec = await store.get_run("run-1")
    assert (rec.last_seq, rec.status) == (before, "awaiting_tool")
    assert [s.event for s in await store.read_events("run-1")] == b.log[:before]
    kinds = backend.sql("SELECT kind FROM events WHERE run_id = ?", "run-1")
    assert len(kinds) == before and ("tool_result_recorded",) not in kinds

    # the same batch commits now, once
    assert await b.flush(store, epoch=epoch) == before + len(batch)
    log = await store.read_events("run-1")
    assert [s.event for s in log] == b.log
    assert Counter(s.event.kind for s in log)["tool_result_recorded"] == 2
