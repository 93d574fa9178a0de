"""The store contract on both backends, for real: SQLite and PostgreSQL run the same assertions.

What scale-out relies on: a stale sequence is a ``Conflict``; a lower epoch is ``Fenced``,
checked inside the write's own transaction (a write racing a takeover is refused, not
interleaved); one result per call, whatever the writer; ``claim_next`` hands each run to
exactly one of 8 concurrent claiming processes, and takes over only lapsed leases; waiting for
a change wakes on notices and, when notices are lost, on the poll.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, postgres_backend
from _builders import T0, RunBuilder, created, result, seeded

from _wait import until_async
from stead.core.events import ApprovalRequested, RunCreated, ToolResultRecorded
from stead.errors import Conflict, CorruptEvent, Fenced, RunNotFound, StoreError
from stead.store import Store, open_store

pytestmark = pytest.mark.timeout(60)

TTL = 30.0
CLAIM_CHILD = Path(__file__).parent / "_claim_child.py"


def rows(store_log: Sequence[Any]) -> list[tuple[int, str]]:
    return [(e.seq, e.event.kind) for e in store_log]


# -- sequence and epoch ---------------------------------------------------------------------


async def test_a_stale_sequence_is_a_conflict_and_writes_nothing(store: Store) -> None:
    b = await seeded(store, "run-1")
    before = await store.read_events("run-1")
    b.final_turn()
    with pytest.raises(Conflict, match=r"run-1.*expected to append after seq 2"):
        await store.append("run-1", b.pending, expected_seq=2, epoch=0, status=b.status, now=T0 + 2)
    assert await store.read_events("run-1") == before
    rec = await store.get_run("run-1")
    assert (rec.last_seq, rec.status) == (b.written, "awaiting_tool")
    assert await b.flush(store, now=T0 + 3) == b.written  # the right sequence still works


async def test_a_lower_epoch_is_fenced_and_writes_nothing(store: Store) -> None:
    b = await seeded(store, "run-1")
    old = await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    [taken] = await store.claim_next(owner="b", now=T0 + TTL + 1, ttl=TTL)
    assert (taken.run_id, taken.previous_owner) == ("run-1", "a")
    assert taken.epoch == old + 1
    before = await store.read_events("run-1")
    b.final_turn()
    # even with the right sequence: the epoch is checked first
    with pytest.raises(Fenced, match=rf"epoch {old} refused.*epoch {taken.epoch}"):
        await store.append(
            "run-1", b.pending, expected_seq=b.written, epoch=old, status=b.status, now=T0 + 40
        )
    with pytest.raises(Fenced):
        await store.renew("run-1", owner="a", epoch=old, now=T0 + 40, ttl=TTL)
    await store.release("run-1", owner="a", epoch=old)  # a no-op for a fenced owner
    assert await store.read_events("run-1") == before
    rec = await store.get_run("run-1")
    assert (rec.epoch, rec.lease_owner, rec.status) == (taken.epoch, "b", "awaiting_tool")
    await b.flush(store, epoch=taken.epoch, now=T0 + 41)
    assert (await store.get_run("run-1")).status == "completed"


async def test_the_epoch_is_checked_inside_the_writes_own_transaction(
    backend: Backend, store: Store
) -> None:
    """A takeover that commits while an append at the old epoch waits on the row is seen by
    that append: it is refused, not written on a stale read of the epoch."""
    b = await seeded(store, "run-1")
    epoch = await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    before = await store.read_events("run-1")
    takeover = backend.connect()
    try:
        if backend.name == "sqlite":
            takeover.execute("BEGIN IMMEDIATE")
        takeover.execute(
            "UPDATE runs SET epoch = epoch + 1, lease_owner = 'b' WHERE run_id = 'run-1'"
        )
        # Commit from another thread while the append below waits for the row (PostgreSQL)
        # or for the database's write lock (SQLite, whose store blocks this thread).
        commit = (
            (lambda: takeover.execute("COMMIT")) if backend.name == "sqlite" else takeover.commit
        )
        timer = threading.Timer(0.5, commit)
        timer.start()
        b.final_turn()
        with pytest.raises(Fenced, match=rf"epoch {epoch} refused"):
            await store.append(
                "run-1", b.pending, expected_seq=b.written, epoch=epoch, status=b.status, now=T0
            )
        timer.join()
    finally:
        takeover.close()
    assert await store.read_events("run-1") == before
    assert (await store.get_run("run-1")).lease_owner == "b"


# -- one result per call --------------------------------------------------------------------


async def test_one_result_per_call_is_enforced_by_the_store(store: Store) -> None:
    b = RunBuilder("run-1")
    await b.create(store)
    b.start()
    b.tool_turn(calls=2, results=False)
    await b.flush(store)
    first = result(0, "call_0_0", content="first")
    seq = await store.append(
        "run-1", [first], expected_seq=b.written, epoch=0, status="awaiting_tool", now=T0
    )
    before = await store.read_events("run-1")
    # the store does not fold: only its unique index stands between a second writer and a
    # second result for the same (run, turn, call)
    for batch in ([result(0, "call_0_0", content="second")], [result(0, "call_0_1"), first]):
        with pytest.raises(Conflict, match="already recorded"):
            await store.append(
                "run-1", batch, expected_seq=seq, epoch=0, status="awaiting_tool", now=T0
            )
    assert await store.read_events("run-1") == before
    assert (await store.get_run("run-1")).last_seq == seq
    # the other call's result, and the same call id in another run, are fine
    await store.append(
        "run-1", [result(0, "call_0_1")], expected_seq=seq, epoch=0, status="running", now=T0
    )
    other = RunBuilder("run-2")
    await other.create(store)
    other.start()
    other.tool_turn(calls=1)
    await other.flush(store)
    results: Counter[tuple[str, int, str]] = Counter()
    for run in ("run-1", "run-2"):
        for e in await store.read_events(run):
            if isinstance(e.event, ToolResultRecorded):
                results[(run, e.event.turn_index, e.event.tool_call_id)] += 1
    assert len(results) == 3
    assert set(results.values()) == {1}


# -- claims ---------------------------------------------------------------------------------


async def test_claim_next_takes_only_what_nobody_holds(store: Store) -> None:
    for rid in ("q1", "q2"):
        await store.create_run(created(rid), now=T0)
    live = await seeded(store, "live", now=T0 + 1)
    lapsed = await seeded(store, "lapsed", now=T0 + 2)
    released = await seeded(store, "released", now=T0 + 3)
    done = await seeded(store, "done", now=T0 + 4)
    done.final_turn()
    await done.flush(store, now=T0 + 4)
    waiting = RunBuilder("waiting")
    await waiting.create(store, now=T0 + 5)
    waiting.start()
    waiting.tool_turn(calls=1, results=False)
    waiting.add(
        ApprovalRequested(
            turn_index=0, tool_call_id="call_0_0", reason="policy", payload={}, token="t"
        )
    )
    await waiting.flush(store, now=T0 + 5)
    await store.create_run(RunCreated(run_id="theirs", agent="billing", input="x"), now=T0 + 6)
    assert (await store.get_run("waiting")).status == "awaiting_approval"

    now = T0 + 100
    await store.claim("live", owner="x", now=now, ttl=TTL)
    await store.claim("lapsed", owner="dead", now=now - 2 * TTL, ttl=TTL)
    e = await store.claim("released", owner="gone", now=now, ttl=TTL)
    await store.release("released", owner="gone", epoch=e)
    del live, lapsed, released

    claims = await store.claim_next(owner="w", now=now, ttl=TTL, limit=10, agents=["support"])
    got = {c.run_id: c for c in claims}
    assert list(got) == ["q1", "q2", "lapsed", "released"]  # oldest update first
    assert got["q1"].epoch == 1 and got["q1"].status == "queued"
    assert got["q1"].previous_owner is None and got["q1"].agent == "support"
    assert (got["lapsed"].epoch, got["lapsed"].previous_owner) == (2, "dead")
    assert (got["released"].epoch, got["released"].previous_owner) == (2, None)
    for c in claims:
        rec = await store.get_run(c.run_id)
        assert (rec.epoch, rec.lease_owner, rec.lease_expires_at) == (c.epoch, "w", now + TTL)
    assert await store.claim_next(owner="w2", now=now, ttl=TTL, limit=10, agents=["support"]) == []
    assert await store.claim_next(owner="w2", now=now, ttl=TTL, agents=[]) == []
    [theirs] = await store.claim_next(owner="w2", now=now, ttl=TTL, limit=10)
    assert theirs.run_id == "theirs" and theirs.agent == "billing"


async def test_eight_concurrent_claimers_get_each_run_exactly_once(
    backend: Backend, store: Store, tmp_path: Path
) -> None:
    """Eight processes claim at once from 200 runs, in batches of 1 to 3; then all leases
    lapse and the eight claim again. Each round, every run goes to exactly one of them."""
    n = 200
    for i in range(n):
        await store.create_run(created(f"run-{i:03}"), now=T0 + i)
    everything = {f"run-{i:03}" for i in range(n)}
    owners = [f"claimer-{k}" for k in range(8)]
    rounds = [T0 + 1000, T0 + 1000 + 2 * TTL]
    procs = [_claimer(backend.url, owner, tmp_path, rounds) for owner in owners]
    try:
        for k in range(1, len(rounds) + 1):
            await _all_exist(procs, [tmp_path / f"ready-{k}.{o}" for o in owners])
            (tmp_path / f"go-{k}").touch()
            files = [tmp_path / f"claims-{k}.{o}" for o in owners]
            await _all_exist(procs, files)
            got = {o: json.loads(f.read_text()) for o, f in zip(owners, files, strict=True)}
            claimed = [c[0] for claims in got.values() for c in claims]
            print(f"{backend.name} round {k}: runs per claimer", sorted(map(len, got.values())))
            assert len(claimed) == n, Counter(claimed).most_common(3)
            assert set(claimed) == everything
            assert sum(1 for claims in got.values() if claims) >= 2, "no overlap at all"
            holder = {c[0]: o for o, claims in got.items() for c in claims}
            for claims in got.values():
                for _run_id, epoch, previous in claims:
                    assert epoch == k
                    assert (previous is None) if k == 1 else previous.startswith("claimer-")
            for rec in await store.list_runs(limit=1000):
                assert (rec.epoch, rec.lease_owner) == (k, holder[rec.run_id])
    finally:
        for p in procs:
            p.kill() if p.poll() is None else None
            _, err = p.communicate(timeout=30)
            assert p.returncode == 0 or "Killed" in err or p.returncode < 0, err


def _claimer(url: str, owner: str, folder: Path, rounds: list[float]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CLAIM_CHILD), url, owner, str(folder), *map(repr, rounds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _all_exist(procs: list[subprocess.Popen[str]], paths: list[Path]) -> None:
    def written() -> bool:
        dead = [p for p in procs if p.poll() not in (None, 0)]
        assert not dead, dead[0].communicate()[1]
        return all(p.exists() for p in paths)

    await until_async(written, "every child's file", every=0.01)


# -- waiting for changes --------------------------------------------------------------------


async def test_wait_changed_wakes_when_another_store_appends(backend: Backend) -> None:
    # On PostgreSQL the poll is an hour: only the notice can wake the waiter in time.
    poll = 0.1 if backend.name == "sqlite" else 3600.0
    watcher, writer = backend.open(poll_interval=poll), backend.open()
    b = await seeded(writer, "run-1")
    assert await watcher.wait_changed("run-1", b.written, timeout=0.05) == b.written
    waiting = asyncio.ensure_future(watcher.wait_changed("run-1", b.written, timeout=45))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    b.final_turn()
    seq = await b.flush(writer, now=T0 + 5)
    assert await waiting == seq
    assert await watcher.wait_changed("run-1", 0, timeout=45) == seq  # already past: at once
    with pytest.raises(RunNotFound):
        await watcher.wait_changed("nope", 0, timeout=1)


async def test_a_lost_notice_costs_at_most_a_poll(backend: Backend) -> None:
    """A write that sends no notice (as if it were lost) is still seen, through the poll."""
    watcher, writer = backend.open(poll_interval=0.2), backend.open()
    b = await seeded(writer, "run-1")
    waiting = asyncio.ensure_future(watcher.wait_changed("run-1", b.written, timeout=45))
    await asyncio.sleep(0.3)
    backend.sql("UPDATE runs SET last_seq = last_seq + 1 WHERE run_id = 'run-1'")
    assert await waiting == b.written + 1


async def test_wait_claimable_wakes_on_a_new_run(backend: Backend) -> None:
    watcher, writer = backend.open(), backend.open()
    if backend.name == "sqlite":
        # No notices cross processes on SQLite: the waiter sleeps its time, then claims.
        await watcher.wait_claimable(timeout=0.05)
    else:
        from stead.store.postgres import PostgresStore

        assert isinstance(watcher, PostgresStore)
        await watcher.wait_claimable(timeout=10)  # starts listening; connecting wakes it
        await until_async(lambda: watcher.listening, "the watcher listening", timeout=10)
        await watcher.wait_claimable(timeout=0)  # whatever wake-up connecting left behind
        # An hour-long wait that only the notice of another store's create can end.
        waiting = asyncio.ensure_future(watcher.wait_claimable(timeout=3600))
        await asyncio.sleep(0.5)
        assert not waiting.done()
    await writer.create_run(created("run-1"), now=T0)
    if backend.name != "sqlite":
        await waiting
    [c] = await watcher.claim_next(owner="w", now=T0, ttl=TTL)
    assert c.run_id == "run-1"


async def test_postgres_listener_reconnects_after_its_connection_is_killed(
    pg_url: str,
) -> None:
    """With an hour-long poll, only notices can wake these waiters: before the listener's
    connection is killed, and after it reconnected by itself."""
    from stead.store.postgres import PostgresStore

    listeners = (
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'stead-listen'"
        " AND datname = current_database()"  # the run's server is shared by the xdist workers
    )
    async with postgres_backend(pg_url) as b:
        watcher, writer = b.open(poll_interval=3600.0), b.open()
        assert isinstance(watcher, PostgresStore)
        runs = [await seeded(writer, "run-1"), await seeded(writer, "run-2")]

        async def heard(run: RunBuilder, reconnected: Callable[[], bool]) -> None:
            waiting = asyncio.ensure_future(watcher.wait_changed(run.run_id, run.written, 45))
            channel = watcher.run_channel(run.run_id)
            # the listener (re)connects on its own, then hears the run
            await until_async(
                lambda: reconnected() and watcher._listener.listening(channel),
                "the listener back and hearing the run",
                timeout=40,
            )
            before = watcher.notices
            run.final_turn()
            seq = await run.flush(writer, now=T0 + 1)
            assert await waiting == seq
            # The waiter may have returned on the listener's re-read of a channel it just
            # began hearing (how a notice lost while it was away is caught up); the notice
            # itself still comes, on the (re)connected listener, or this fails.
            await until_async(lambda: watcher.notices > before, "the run's notice", timeout=10)
            assert watcher.notices > before

        await heard(runs[0], lambda: watcher.listening)
        [(old_pid,)] = b.sql(listeners)
        assert b.sql("SELECT pg_terminate_backend(?)", old_pid) == [(True,)]
        await heard(
            runs[1], lambda: watcher.listening and b.sql(listeners) not in ([], [(old_pid,)])
        )


# -- errors at the boundary -----------------------------------------------------------------


async def test_foreign_errors_become_stead_errors(backend: Backend, store: Store) -> None:
    await seeded(store, "run-1")
    with pytest.raises(Conflict, match="already exists"):
        await store.create_run(created("run-1"), now=T0)
    with pytest.raises(RunNotFound):
        await store.get_run("nope")
    with pytest.raises(RunNotFound):
        await store.read_events("nope")
    with pytest.raises(RunNotFound):
        await store.append("nope", [result(0, "c")], expected_seq=1, epoch=0, status="x", now=T0)
    backend.sql("UPDATE events SET data = '{not json' WHERE run_id = 'run-1' AND seq = 3")
    with pytest.raises(CorruptEvent, match=r"run 'run-1' at seq 3") as caught:
        await store.read_events("run-1")
    assert (caught.value.run_id, caught.value.seq) == ("run-1", 3)
    backend.sql("UPDATE events SET kind = 'no_such_kind', data = '{}' WHERE seq = 2")
    with pytest.raises(CorruptEvent, match="at seq 2"):
        await store.load("run-1")
    backend.sql("DROP TABLE snapshots")  # any other failure of the database itself
    with pytest.raises(StoreError, match="snapshots") as failed:
        await store.load("run-1")
    assert type(failed.value) is StoreError


async def test_an_unreachable_postgres_is_a_store_error() -> None:
    pytest.importorskip("psycopg")
    from stead.store.postgres import PostgresStore

    with socket.socket() as s:  # bound and never listening: refused, and no other test's port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        url = f"postgresql://nobody:secret@127.0.0.1:{port}/x"
        for opening in (lambda: PostgresStore(url, timeout=1.0), lambda: open_store(url)):
            with pytest.raises(StoreError, match=rf"cannot open .* 127.0.0.1:{port}/x") as caught:
                opening()
            assert "secret" not in str(caught.value)
