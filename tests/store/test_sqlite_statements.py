"""Statements SQLite runs for one store call, counted through its trace hook (never timed)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from _builders import T0, RunBuilder, created

from stead.store import SQLiteStore, Store


async def test_last_seqs_of_many_runs_is_one_statement(store: Store) -> None:
    """A worker's keeper asks for every held run's position each watch interval: one
    statement for all of them, not one a run. Runs that do not exist are left out."""
    if not isinstance(store, SQLiteStore):
        pytest.skip("SQLite only (PostgreSQL's is one statement too)")
    for i in range(30):
        await store.create_run(created(f"run-{i}"), now=T0)
    seen: list[str] = []

    def hook() -> Callable[[str], None]:
        return seen.append

    store._trace(hook)
    asked = [f"run-{i}" for i in range(0, 30, 2)] + ["nobody", 'it\'s "quoted"']
    assert await store.last_seqs(asked) == {f"run-{i}": 1 for i in range(0, 30, 2)}
    assert len(seen) == 1
    assert await store.last_seqs([]) == {}
    assert len(seen) == 1


async def test_a_steps_store_calls_run_only_the_statements_they_need(store: Store) -> None:
    """What one run costs the store, statement by statement (each is a few µs of Python and
    SQLite): a read has no BEGIN/COMMIT around it (each statement is its own snapshot); a
    release is one statement, which SQLite commits alone; a claim (an update and the read of
    its epoch) and a lone append (its guard and its rows) run inside BEGIN IMMEDIATE ...
    COMMIT. The claim and the release are unsynced, the append is not: a PRAGMA turns the
    connection's mode where it changes, not around each unsynced write."""
    if not isinstance(store, SQLiteStore):
        pytest.skip("SQLite only (PostgreSQL's round trips: test_pg_round_trips)")
    b = RunBuilder("run-1")
    await b.create(store)
    seen: list[str] = []

    def hook() -> Callable[[str], None]:
        return lambda statement: seen.append(statement.split(" ", 2)[0].upper())

    store._trace(hook)

    def taken() -> list[str]:
        out = seen[:]
        seen.clear()
        return out

    await store.get_run("run-1")
    assert taken() == ["SELECT"]
    epoch = await store.claim("run-1", owner="w", now=T0, ttl=60)
    assert taken() == ["PRAGMA", "BEGIN", "UPDATE", "SELECT", "COMMIT"]
    await store.load("run-1")
    assert taken() == ["SELECT", "SELECT"]
    b.start(owner="w", epoch=epoch)
    b.tool_turn(calls=1)
    await b.flush(store, epoch=epoch)
    statements = taken()
    assert statements[:3] == ["PRAGMA", "BEGIN", "UPDATE"] and statements[-1] == "COMMIT"
    assert statements[3:-1] == ["INSERT"] * (len(b.log) - 1)
    b.tool_turn(calls=1)
    await b.flush(store, epoch=epoch)  # synced as the one before: no PRAGMA
    statements = taken()
    assert statements[:2] == ["BEGIN", "UPDATE"] and statements[-1] == "COMMIT"
    await store.release("run-1", owner="w", epoch=epoch)
    assert taken() == ["PRAGMA", "UPDATE"]
    assert (await store.get_run("run-1")).lease_owner is None
    assert [s.event for s in await store.read_events("run-1")] == b.log


async def test_an_event_rows_missing_turn_and_call_are_null(tmp_path: Path) -> None:
    """A row's turn index and call id go to SQLite as plain values (a None would cost the
    driver an adapter lookup each), a missing one as a value of the other type that the
    statement turns back into NULL: the columns hold NULL where the event has none, and the
    event's own value, whatever it is, where it has one; alone, in a batch, at creation."""
    store = SQLiteStore(tmp_path / "s.db")
    try:
        b = RunBuilder("run-1")
        await b.create(store)
        b.start()
        b.tool_turn(calls=2, ids=["0", ""])  # ids that look like the placeholders' values
        await b.flush(store)
        others = [RunBuilder(f"run-{i}") for i in (2, 3)]
        for o in others:
            await o.create(store)
            o.start()
            o.tool_turn(calls=1)
        await asyncio.gather(*(o.flush(store) for o in others))  # one batch
        rows = store._db.execute(
            "SELECT run_id, seq, kind, turn_index, typeof(turn_index), tool_call_id, "
            "typeof(tool_call_id) FROM events ORDER BY run_id, seq"
        ).fetchall()
        assert [s.event for s in await store.read_events("run-1")] == b.log
    finally:
        await store.close()
    by_kind = {(r[0], r[2]): r[3:] for r in rows}
    assert by_kind[("run-1", "run_created")] == (None, "null", None, "null")
    assert by_kind[("run-1", "run_started")] == (None, "null", None, "null")
    assert by_kind[("run-1", "turn_started")] == (0, "integer", None, "null")
    calls = sorted(r[5] for r in rows if r[0] == "run-1" and r[2] == "tool_result_recorded")
    assert calls == ["", "0"]
    assert {r[6] for r in rows if r[2] == "tool_result_recorded"} == {"text"}
    assert len({r[0] for r in rows}) == 3
