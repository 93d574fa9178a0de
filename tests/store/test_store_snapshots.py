"""Snapshots keep resume cost flat: load() hands back the latest snapshot and only the tail."""

from __future__ import annotations

import copy
import hashlib
import zlib

import pytest
from _backends import Backend
from _builders import T0, RunBuilder, fold_log, seeded

from stead.core.fold import RunState, apply
from stead.runtime import OwnedRun
from stead.store import Store
from stead.store.sql._store import pack, unpack

# 180 s: the ten-thousand-event runs are CPU in this process, slow on a busy machine.
pytestmark = pytest.mark.timeout(180)


async def test_load_returns_the_snapshot_and_only_the_tail_after_it(store: Store) -> None:
    b = await seeded(store, "run-1", turns=1)
    b.tool_turn(calls=2)
    snap_seq = await b.flush(store, now=T0 + 2, snapshot=True)
    snap_state = copy.deepcopy(b.state.to_json())  # to_json() shares lists with the state
    b.tool_turn(calls=1)
    b.final_turn()
    last = await b.flush(store, now=T0 + 3)

    loaded = await store.load("run-1")
    assert loaded.snapshot_seq == snap_seq
    assert loaded.snapshot == snap_state
    assert [s.seq for s in loaded.tail] == list(range(snap_seq + 1, last + 1))
    assert [s.event for s in loaded.tail] == b.log[snap_seq:]
    assert loaded.record.last_seq == last

    state, covered = await OwnedRun.load_state(store, "run-1")
    assert covered == snap_seq
    assert state.to_json() == fold_log(b.log).to_json() == b.state.to_json()


async def test_a_newer_snapshot_replaces_the_older_one(store: Store) -> None:
    b = await seeded(store, "run-1", turns=1)
    b.tool_turn()
    s1 = await b.flush(store, snapshot=True)
    b.tool_turn()
    s2 = await b.flush(store, snapshot=True)
    loaded = await store.load("run-1")
    assert (loaded.snapshot_seq, loaded.tail) == (s2, [])
    assert loaded.snapshot == b.state.to_json()
    assert s2 > s1


async def test_a_snapshot_at_the_last_seq_leaves_an_empty_tail(store: Store) -> None:
    b = await seeded(store, "run-1")
    b.final_turn()
    last = await b.flush(store, snapshot=True)
    loaded = await store.load("run-1")
    assert (loaded.snapshot_seq, loaded.tail) == (last, [])
    state, _ = await OwnedRun.load_state(store, "run-1")
    assert state.status is not None and state.status.value == "completed"


async def test_ten_thousand_events_resume_from_a_snapshot_and_a_short_tail(store: Store) -> None:
    """A 10,001-event run written as OwnedRun writes it: a snapshot whenever 256 or more
    events have been appended since the last one. (The Runtime test in test_store_space
    checks OwnedRun's own cadence.)"""
    run_id, every = "run-long", 256
    b = RunBuilder(run_id)
    await b.create(store)
    epoch = await store.claim(run_id, owner="w", now=T0, ttl=600)
    b.start(owner="w", epoch=epoch)
    turns, per_append = 1666, 8  # 6 events a turn: 2 + 6 * 1666 + 3 = 10,001 events
    snapshot_seq, snapshots = 0, 0
    for first in range(0, turns + 1, per_append):
        for turn in range(first, min(first + per_append, turns)):
            b.tool_turn(calls=2, text=f"turn {turn}")
        if first + per_append > turns:
            b.final_turn()
        due = b.state.seq - snapshot_seq >= every
        await b.flush(store, epoch=epoch, now=T0 + first, snapshot=due)
        if due:
            snapshot_seq, snapshots = b.state.seq, snapshots + 1
    assert b.written == len(b.log) == 10_001 and snapshots > 30

    loaded = await store.load(run_id)
    assert (loaded.record.last_seq, loaded.record.status) == (10_001, "completed")
    assert loaded.snapshot_seq == snapshot_seq
    assert len(loaded.tail) < every
    assert [s.seq for s in loaded.tail] == list(range(snapshot_seq + 1, 10_002))

    resumed, covered = await OwnedRun.load_state(store, run_id)
    assert covered == snapshot_seq
    full = RunState()
    for stored in await store.read_events(run_id):
        apply(full, stored.event, stored.seq)
    assert full.seq == 10_001
    assert resumed.to_json() == full.to_json() == b.state.to_json()


async def test_snapshots_are_per_run(store: Store) -> None:
    a = await seeded(store, "run-a")
    a.tool_turn()
    await a.flush(store, snapshot=True)
    await seeded(store, "run-b")
    assert (await store.load("run-b")).snapshot is None
    assert (await store.load("run-a")).snapshot == a.state.to_json()


def test_builders_fold() -> None:
    """The builders' logs are valid by the core's own rules (a guard for the suite)."""
    b = RunBuilder("run-x")
    b.start()
    b.tool_turn(calls=3)
    b.final_turn()
    assert fold_log(b.log).to_json() == b.state.to_json()


async def test_both_backends_keep_a_snapshot_in_one_encoding(
    store: Store, backend: Backend
) -> None:
    """zlib-packed checksummed JSON on SQLite and PostgreSQL alike (PostgreSQL kept plain text
    before); the checksum inside the packed blob is verified on load."""
    b = await seeded(store, "run-1")
    b.final_turn()
    await b.flush(store, snapshot=True)
    [(raw,)] = backend.sql("SELECT state FROM snapshots WHERE run_id = ?", "run-1")
    assert bytes(raw) == pack(b.state.to_json())
    head, _, body = zlib.decompress(bytes(raw)).decode("utf-8").partition("\n")
    assert head == "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()
    assert unpack(bytes(raw)) == (await store.load("run-1")).snapshot == b.state.to_json()

    # The same blob with its JSON edited under the old checksum is not relied on.
    edited = body.replace('"completed"', '"failed"')
    assert edited != body
    repacked = zlib.compress(f"{head}\n{edited}".encode(), 1)
    backend.sql("UPDATE snapshots SET state = ? WHERE run_id = ?", repacked, "run-1")
    loaded = await store.load("run-1")
    assert (loaded.snapshot, loaded.snapshot_seq, len(loaded.tail)) == (None, 0, b.written)
