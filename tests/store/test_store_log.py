"""The log: create, append, read back, list; and what a refused write leaves behind (nothing)."""

from __future__ import annotations

import dataclasses

import pytest
from _builders import T0, RunBuilder, created, every_kind, final_turn, seeded

from stead.core.events import EVENT_TYPES, TurnStarted
from stead.errors import Conflict, RunNotFound, UserError
from stead.store import Store

pytestmark = pytest.mark.timeout(30)


async def test_create_run_writes_run_created_at_seq_1(store: Store) -> None:
    event = created("run-1", session_id="sess", correlation_id="corr-9")
    await store.create_run(event, now=T0)

    rec = await store.get_run("run-1")
    assert (rec.run_id, rec.agent, rec.session_id, rec.correlation_id) == (
        "run-1",
        "support",
        "sess",
        "corr-9",
    )
    assert (rec.status, rec.last_seq, rec.epoch) == ("queued", 1, 0)
    assert (rec.lease_owner, rec.lease_expires_at) == (None, None)
    assert rec.created_at == rec.updated_at == T0
    [only] = await store.read_events("run-1")
    assert (only.seq, only.event, only.created_at) == (1, event, T0)


async def test_append_round_trips_and_returns_the_new_last_seq(store: Store) -> None:
    b = RunBuilder("run-1")
    await b.create(store, now=T0)
    b.start()
    b.tool_turn(calls=2)
    first = list(b.pending)

    assert await b.flush(store, now=T0 + 5) == 1 + len(first)
    b.final_turn()
    second = list(b.pending)
    assert await b.flush(store, now=T0 + 9) == 1 + len(first) + len(second)

    stored = await store.read_events("run-1")
    assert [s.seq for s in stored] == list(range(1, len(b.log) + 1))
    assert [s.event for s in stored] == b.log
    assert [s.created_at for s in stored] == [T0] + [T0 + 5] * len(first) + [T0 + 9] * len(second)
    rec = await store.get_run("run-1")
    assert (rec.status, rec.last_seq, rec.updated_at, rec.created_at) == (
        "completed",
        len(b.log),
        T0 + 9,
        T0,
    )


async def test_read_events_after_returns_the_suffix(store: Store) -> None:
    b = await seeded(store, "run-1", turns=2)
    n = len(b.log)
    assert [s.seq for s in await store.read_events("run-1", after=3)] == list(range(4, n + 1))
    assert [s.event for s in await store.read_events("run-1", after=3)] == b.log[3:]
    assert await store.read_events("run-1", after=n) == []


async def test_read_events_with_a_limit_returns_only_the_first_ones(store: Store) -> None:
    """A conversation's chain wants each earlier run's run_created alone: it must not decode
    the whole log to take it (runtime/loop/_history.py)."""
    b = await seeded(store, "run-1", turns=2)
    n = len(b.log)
    [first] = await store.read_events("run-1", limit=1)
    assert (first.seq, first.event) == (1, b.log[0])
    assert [s.seq for s in await store.read_events("run-1", after=2, limit=3)] == [3, 4, 5]
    assert [s.seq for s in await store.read_events("run-1", after=n - 1, limit=5)] == [n]
    assert await store.read_events("run-1", after=n, limit=1) == []
    with pytest.raises(RunNotFound):
        await store.read_events("nope", limit=1)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(UserError, match="limit takes a positive int"):
            await store.read_events("run-1", limit=bad)  # type: ignore[arg-type]


async def test_load_without_snapshot_is_the_whole_log(store: Store) -> None:
    b = await seeded(store, "run-1")
    loaded = await store.load("run-1")
    assert loaded.snapshot is None and loaded.snapshot_seq == 0
    assert [s.event for s in loaded.tail] == b.log
    assert loaded.record == await store.get_run("run-1")


async def test_every_event_kind_round_trips_unchanged(store: Store) -> None:
    """The store does not interpret events: any encodable event comes back equal."""
    events = every_kind()
    assert {e.kind for e in events} == set(EVENT_TYPES), "every_kind() misses a kind"
    for e in events:  # and every optional field is away from its default, so it is encoded
        for f in dataclasses.fields(e):
            if f.default is not dataclasses.MISSING:
                assert getattr(e, f.name) != f.default, f"every_kind(): set {e.kind}.{f.name}"
    await store.create_run(events[0], now=T0)
    await store.append("run-kinds", events[1:], expected_seq=1, epoch=0, status="queued", now=T0)
    assert [s.event for s in await store.read_events("run-kinds")] == events


async def test_list_runs_orders_by_last_update_and_filters_by_status(store: Store) -> None:
    assert await store.list_runs() == []
    runs = {rid: RunBuilder(rid) for rid in ["run-a", "run-b", "run-c"]}
    for i, b in enumerate(runs.values()):
        await b.create(store, now=T0 + i)
    runs["run-a"].start()
    await runs["run-a"].flush(store, now=T0 + 10)  # run-a: running, updated last

    assert [r.run_id for r in await store.list_runs()] == ["run-a", "run-c", "run-b"]
    assert [r.run_id for r in await store.list_runs(status="queued")] == ["run-c", "run-b"]
    assert [r.run_id for r in await store.list_runs(status="running")] == ["run-a"]
    assert await store.list_runs(status="completed") == []
    assert [r.run_id for r in await store.list_runs(limit=2)] == ["run-a", "run-c"]
    assert [r.run_id for r in await store.list_runs(status="queued", limit=1)] == ["run-c"]
    assert (await store.list_runs(status="running"))[0] == await store.get_run("run-a")


# -- refusals leave nothing behind ---------------------------------------------------------


async def test_stale_expected_seq_is_a_conflict_and_writes_nothing(store: Store) -> None:
    b = await seeded(store, "run-1")
    before_rec = await store.get_run("run-1")
    before_log = await store.read_events("run-1")
    late = final_turn(b.next_turn)

    for stale in (b.written - 1, b.written + 1, 0):
        with pytest.raises(Conflict, match="run-1"):
            await store.append(
                "run-1",
                late,
                expected_seq=stale,
                epoch=0,
                status="completed",
                now=T0 + 99,
                snapshot=(stale + len(late), {"v": 1}),
            )

    assert await store.get_run("run-1") == before_rec
    assert await store.read_events("run-1") == before_log
    assert (await store.load("run-1")).snapshot is None  # the snapshot was refused too
    # the correct sequence still works afterwards
    assert await store.append(
        "run-1", late, expected_seq=b.written, epoch=0, status="completed", now=T0 + 99
    ) == b.written + len(late)


async def test_missing_run_is_run_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.append(
            "nope", [TurnStarted(turn_index=0)], expected_seq=1, epoch=0, status="running", now=T0
        )
    with pytest.raises(RunNotFound):
        await store.get_run("nope")
    with pytest.raises(RunNotFound):
        await store.load("nope")
    with pytest.raises(RunNotFound):
        await store.read_events("nope")
    assert await store.list_runs() == []


async def test_duplicate_create_run_is_a_conflict_and_keeps_the_original(store: Store) -> None:
    original = created("run-1", input="first")
    await store.create_run(original, now=T0)
    with pytest.raises(Conflict, match="run-1"):
        await store.create_run(created("run-1", input="second", session_id="x"), now=T0 + 1)

    rec = await store.get_run("run-1")
    assert (rec.session_id, rec.updated_at, rec.last_seq) == ("", T0, 1)
    assert [s.event for s in await store.read_events("run-1")] == [original]
