"""Rows the store cannot read: damaged by hand, behind the store's back, with raw SQL.

An event row that does not decode is a ``CorruptEvent`` naming the run and the sequence (a
person has to find it); a hole in the log is a ``StoreError``. A snapshot is only a cache:
a damaged one is ignored and the state is folded from the log instead.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable

import pytest
from _backends import Backend
from _builders import T0, fold_log, seeded

from stead.errors import CorruptEvent, StoreError
from stead.runtime import OwnedRun
from stead.store import Store

pytestmark = pytest.mark.timeout(30)

RUN = "run-1"
SEQ = 4
"""The assistant message of turn 0 (1 created, 2 started, 3 turn_started, 4 reply...)."""


def _data(backend: Backend) -> dict:
    [(text,)] = backend.sql("SELECT data FROM events WHERE run_id = ? AND seq = ?", RUN, SEQ)
    return json.loads(text)


def _set(backend: Backend, column: str, value: object) -> None:
    if column == "data" and isinstance(value, str) and backend.name == "postgres":
        value = value.encode()  # a bytea column (migration 0007): bytes, not bytea's escapes
    backend.sql(f"UPDATE events SET {column} = ? WHERE run_id = ? AND seq = ?", value, RUN, SEQ)


def _without_message(b: Backend) -> None:
    data = _data(b)
    del data["message"]
    _set(b, "data", json.dumps(data))


def _mistyped(b: Backend) -> None:
    _set(b, "data", json.dumps({**_data(b), "turn_index": "zero"}))


def _unknown_field(b: Backend) -> None:
    _set(b, "data", json.dumps({**_data(b), "surprise": 1}))


def _bad_tool_calls(b: Backend) -> None:
    data = _data(b)
    data["message"]["tool_calls"] = ["not-a-call"]
    _set(b, "data", json.dumps(data))


CORRUPTIONS: dict[str, Callable[[Backend], None]] = {
    "not_json": lambda b: _set(b, "data", '{"turn_index": 0,'),
    "json_not_an_object": lambda b: _set(b, "data", "[1, 2]"),
    "missing_field": _without_message,
    "mistyped_field": _mistyped,
    "unknown_field": _unknown_field,
    "malformed_nested_message": _bad_tool_calls,
    "damaged_compressed": lambda b: _set(b, "data", zlib.compress(b'{"turn_index": 0}')[:-2]),
    "unknown_kind": lambda b: _set(b, "kind", "turn_exploded"),
    "newer_version": lambda b: _set(b, "version", 99),
}


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS))
async def test_an_undecodable_event_names_its_run_and_seq(
    store: Store, backend: Backend, corrupt: str
) -> None:
    b = await seeded(store, RUN, turns=2)
    CORRUPTIONS[corrupt](backend)

    for read in (store.load(RUN), store.read_events(RUN), store.read_events(RUN, after=SEQ - 1)):
        with pytest.raises(CorruptEvent) as caught:
            await read
        assert (caught.value.run_id, caught.value.seq) == (RUN, SEQ)
        assert f"'{RUN}'" in str(caught.value) and f"seq {SEQ}" in str(caught.value)

    # the damage is contained: the rest of the log still reads
    after = await store.read_events(RUN, after=SEQ)
    assert [s.event for s in after] == b.log[SEQ:]


async def test_an_event_that_is_not_utf8_names_its_run_and_seq(
    store: Store, backend: Backend
) -> None:
    if backend.name != "sqlite":
        pytest.skip("only SQLite can hold text that is not UTF-8")
    await seeded(store, RUN)
    backend.sql(
        "UPDATE events SET data = CAST(x'7b22ff223a307d' AS TEXT) WHERE run_id = ? AND seq = ?",
        RUN,
        SEQ,
    )
    with pytest.raises(CorruptEvent) as caught:
        await store.read_events(RUN)
    assert (caught.value.run_id, caught.value.seq) == (RUN, SEQ)


@pytest.mark.parametrize("missing", [1, SEQ])
async def test_a_hole_in_the_log_is_a_store_error(
    store: Store, backend: Backend, missing: int
) -> None:
    await seeded(store, RUN, turns=2)
    backend.sql("DELETE FROM events WHERE run_id = ? AND seq = ?", RUN, missing)
    for read in (store.load(RUN), store.read_events(RUN)):
        with pytest.raises(StoreError, match=rf"{RUN}.*seq {missing}\b"):
            await read


async def test_a_missing_last_event_is_a_store_error(store: Store, backend: Backend) -> None:
    b = await seeded(store, RUN)
    backend.sql("DELETE FROM events WHERE run_id = ? AND seq = ?", RUN, b.written)
    with pytest.raises(StoreError):
        await store.read_events(RUN)
    with pytest.raises(StoreError):
        await store.load(RUN)


# -- snapshots are a cache ---------------------------------------------------------------


def _snap_text(b: Backend) -> str:
    """The snapshot row's text: the checksum line, a newline, the state's JSON (zlib-packed
    on both backends; plain text is read too)."""
    [(raw,)] = b.sql("SELECT state FROM snapshots WHERE run_id = ?", RUN)
    data = bytes(raw) if not isinstance(raw, str) else raw.encode("utf-8")
    return (data if data[:1] in (b"{", b"s") else zlib.decompress(data)).decode("utf-8")


def _snap(b: Backend) -> dict:
    """The snapshot's JSON, without the checksum line in front of it."""
    state: dict = json.loads(_snap_text(b).partition("\n")[2])
    return state


def _signed(text: str) -> str:
    """``text`` with a valid checksum: damage that gets past the checksum, to show that what
    parses but is not a state is still ignored."""
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()}\n{text}"


def _set_snap(b: Backend, value: object, column: str = "state", *, sign: bool = True) -> None:
    """Overwrite a snapshot column; text for ``state`` (signed unless ``sign=False``) is
    stored as its UTF-8 bytes (the column holds bytes on both backends), so it takes the
    uncompressed path."""
    if column == "state" and isinstance(value, str):
        value = (_signed(value) if sign else value).encode("utf-8")
    b.sql(f"UPDATE snapshots SET {column} = ? WHERE run_id = ?", value, RUN)


def _snap_edited(b: Backend) -> None:
    """A change that keeps the snapshot a valid state, checksum left as it was."""
    state = _snap(b)
    state["messages"][0]["content"] = "Something else entirely"
    head = _snap_text(b).partition("\n")[0]
    _set_snap(b, f"{head}\n{json.dumps(state)}", sign=False)


def _snap_without(b: Backend) -> None:
    state = _snap(b)
    del state["messages"]
    _set_snap(b, json.dumps(state))


def _snap_bad_message(b: Backend) -> None:
    state = _snap(b)
    state["messages"][1] = {"role": "robot"}
    _set_snap(b, json.dumps(state))


SNAPSHOT_CORRUPTIONS: dict[str, Callable[[Backend], None]] = {
    "not_json": lambda b: _set_snap(b, '{"v": 1, "run_id":'),
    "json_null": lambda b: _set_snap(b, "null"),
    "other_state_version": lambda b: _set_snap(b, json.dumps({**_snap(b), "v": 999})),
    "missing_key": _snap_without,
    "malformed_message": _snap_bad_message,
    "seq_disagrees": lambda b: _set_snap(b, 3, column="seq"),
    "edited_under_its_checksum": _snap_edited,
    "no_checksum": lambda b: _set_snap(b, json.dumps(_snap(b)), sign=False),
}

SNAPSHOT_BUGS: dict[str, Callable[[Backend], None]] = {
    "json_array": lambda b: _set_snap(b, "[]"),
    "mistyped_usage": lambda b: _set_snap(b, json.dumps({**_snap(b), "usage": []})),
}

_SNAPSHOT_BUG = (
    "BUG: a snapshot that is valid JSON but not the expected shape raises AttributeError "
    "out of OwnedRun.load_state instead of being ignored: RunState.from_json calls .get "
    "on a list (runtime/loop/_owned.py OwnedRun.load_state catches only ValueError/KeyError/"
    "TypeError: also catch AttributeError, and have store/sqlite/_store.py SQLiteStore.load drop a "
    "snapshot that is not a JSON object)"
)


async def _snapshotted_run(store: Store) -> list:
    """Two turns, a snapshot after the first, one more turn after the snapshot."""
    b = await seeded(store, RUN, turns=1)
    b.tool_turn(calls=2)
    await b.flush(store, now=T0 + 2, snapshot=True)
    b.tool_turn(calls=1)
    await b.flush(store, now=T0 + 3)
    loaded = await store.load(RUN)
    assert loaded.snapshot_seq > 0 and loaded.tail  # the set-up really uses the snapshot
    return b.log


@pytest.mark.parametrize(
    "corrupt",
    [
        *SNAPSHOT_CORRUPTIONS,
        *(n for n in SNAPSHOT_BUGS),
    ],
)
async def test_a_damaged_snapshot_is_ignored_and_the_log_folded(
    store: Store, backend: Backend, corrupt: str
) -> None:
    log = await _snapshotted_run(store)
    {**SNAPSHOT_CORRUPTIONS, **SNAPSHOT_BUGS}[corrupt](backend)

    state, snapshot_seq = await OwnedRun.load_state(store, RUN)
    assert snapshot_seq == 0
    assert state.to_json() == fold_log(log).to_json()


async def test_a_snapshot_that_is_not_utf8_is_ignored(store: Store, backend: Backend) -> None:
    if backend.name != "sqlite":
        pytest.skip("only SQLite can hold text that is not UTF-8")
    log = await _snapshotted_run(store)
    _set_snap(backend, b"sha256:00\n\x7b\x22\xff\x22")
    backend.sql("UPDATE snapshots SET state = CAST(state AS TEXT) WHERE run_id = ?", RUN)
    state, _ = await OwnedRun.load_state(store, RUN)
    assert state.to_json() == fold_log(log).to_json()


# -- foreign exceptions are translated --------------------------------------------------


async def test_a_broken_schema_on_the_read_path_is_a_store_error(
    store: Store, backend: Backend
) -> None:
    await _snapshotted_run(store)
    backend.sql("DROP TABLE snapshots")
    with pytest.raises(StoreError):
        await store.load(RUN)


async def test_a_broken_schema_on_the_write_path_is_a_store_error(
    store: Store, backend: Backend
) -> None:
    b = await seeded(store, RUN)
    backend.sql("DROP TABLE snapshots")
    b.final_turn()
    with pytest.raises(StoreError):
        await b.flush(store, snapshot=True)
    assert (await store.get_run(RUN)).last_seq == b.written  # and nothing was written


# -- what a resume relies on, and what it skips --------------------------------------------


@pytest.mark.parametrize("corrupt", ["not_json", "mistyped_field", "unknown_kind"])
async def test_damage_under_the_snapshot_is_skipped_by_resume_and_found_by_verify(
    store: Store, backend: Backend, corrupt: str
) -> None:
    """Resume starts from the (checksummed) snapshot and does not read the rows it covers:
    load_state says how far that goes, and verify reads every row and names the bad one."""
    log = await _snapshotted_run(store)
    covered = (await store.load(RUN)).snapshot_seq
    assert covered >= SEQ  # the damaged row is under the snapshot
    CORRUPTIONS[corrupt](backend)

    state, skipped_through = await OwnedRun.load_state(store, RUN)
    assert skipped_through == covered
    assert state.to_json() == fold_log(log).to_json()  # what it relied on was intact

    with pytest.raises(CorruptEvent) as caught:
        await OwnedRun.verify(store, RUN)
    assert (caught.value.run_id, caught.value.seq) == (RUN, SEQ)


async def test_damage_under_a_damaged_snapshot_is_found_by_resume(
    store: Store, backend: Backend
) -> None:
    """A snapshot that fails its checksum is not relied on: the log is folded, and a bad row
    under it is then a CorruptEvent naming its seq."""
    await _snapshotted_run(store)
    _snap_edited(backend)
    CORRUPTIONS["mistyped_field"](backend)
    with pytest.raises(CorruptEvent) as caught:
        await OwnedRun.load_state(store, RUN)
    assert (caught.value.run_id, caught.value.seq) == (RUN, SEQ)


async def test_verify_passes_an_intact_run_and_finds_a_snapshot_unlike_its_log(
    store: Store, backend: Backend
) -> None:
    log = await _snapshotted_run(store)
    assert await OwnedRun.verify(store, RUN) == len(log)
    state = _snap(backend)
    state["messages"][0]["content"] = "Something else entirely"
    _set_snap(backend, json.dumps(state))  # a valid checksum over a state the log never had
    with pytest.raises(StoreError, match=rf"{RUN}.*snapshot at seq"):
        await OwnedRun.verify(store, RUN)


async def test_a_log_cut_inside_one_transaction_names_the_run_and_seq(
    store: Store, backend: Backend
) -> None:
    """A reply's intents are one transaction; lose one of them (and renumber, so there is no
    hole) and its result no longer follows: the fold on load names where."""
    b = await seeded(store, RUN, calls=2)
    kinds = [e.kind for e in b.log]
    cut = kinds.index("tool_call_requested") + 1  # the first intent, seq counted from 1
    backend.sql("DELETE FROM events WHERE run_id = ? AND seq = ?", RUN, cut)
    # renumber in two steps, away from the primary key's range and back, so no
    # intermediate row collides
    backend.sql("UPDATE events SET seq = seq + 1000000 WHERE run_id = ? AND seq > ?", RUN, cut)
    backend.sql("UPDATE events SET seq = seq - 1000001 WHERE run_id = ? AND seq > ?", RUN, cut)
    backend.sql("UPDATE runs SET last_seq = last_seq - 1 WHERE run_id = ?", RUN)

    with pytest.raises(CorruptEvent) as caught:
        await OwnedRun.load_state(store, RUN)
    assert caught.value.run_id == RUN
    bad = caught.value.seq
    assert cut <= bad < b.written
    assert f"seq {bad}" in str(caught.value)
