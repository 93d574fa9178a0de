"""Progress from afar: a model call performed by an executor pool streams
its provisional text back to the run's owner, to ``Runtime(on_progress=...)``, in order, in
a generation the owner opened; only the final message is recorded; the executor's frames are
deleted once the call settled. On both stores (the pool a task of this loop on its own
store connection, as in test_store_executor.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest
from _streamer import CHUNKS, Streamer

import stead
from _wait import until_async
from stead.runtime import Pool
from stead.store.ledger import _progress

pytestmark = pytest.mark.timeout(90)

QUEUE = "model-stream"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'runs.db'}"


async def test_a_pooled_model_call_streams_to_the_owners_on_progress(url: str) -> None:
    model = Streamer()
    agent = stead.Agent("far-streamer", model, model_queue=QUEUE)  # type: ignore[arg-type]
    frames: list[Any] = []

    def listen(frame: Any) -> None:
        frames.append(frame)
        if "".join(f.text for f in frames) == "".join(CHUNKS):
            model.seen.set()

    pool = Pool(url, [agent], queues=[QUEUE], poll_interval=0.02, lease_ttl=30)
    serving = asyncio.ensure_future(pool.run())
    try:
        await until_async(
            lambda: pool.ledger.serves(QUEUE, now=time.time()), "the pool serving", timeout=12
        )
        async with stead.Runtime(url, agents=[agent], on_progress=listen) as rt:
            await rt.start(agent, "go", run_id="r-far")
            view = await rt.run("r-far")
            events = [e.event for e in await rt.events("r-far")]
        assert view.status == stead.RunStatus.COMPLETED, events
        assert view.output == "Hello world"
        assert model.seen.is_set()
        assert "".join(f.text for f in frames) == "Hello world"
        assert {(f.run_id, f.generation) for f in frames} == {("r-far", 1)}
        assert [f.sequence for f in frames] == list(range(len(frames)))
        [effect_id] = await pool.ledger.keys("r-far")
        assert await _progress.frames(pool.ledger, effect_id, -1) == []  # deleted at settle
    finally:
        pool.stop()
        pool.stop()
        await serving
        await pool.close()


async def test_frames_lost_on_the_way_show_as_a_gap_in_the_owners_sequence(
    tmp_path: Path,
) -> None:
    """The executor's frames 1 and 2 never reached the store: the owner's subscriber sees
    sequence 0 then 3 (a gap, as for an eviction), and the follower counts them."""
    from stead.core.progress import Cursor, ProgressWindow
    from stead.runtime.executors._far_progress import Follower, far_sink
    from stead.store import open_store
    from stead.store.ledger._ledger import ledger_for

    store = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    ledger = ledger_for(store)
    seen: list[Any] = []
    window = ProgressWindow(listeners=[seen.append])
    try:
        await _progress.publish(ledger, "m1", 0, ["a"], now=0.0)
        await _progress.publish(ledger, "m1", 3, ["d"], now=0.0)
        sink, holes = far_sink(window, "r1", 0)
        follower = Follower(ledger, "m1", sink, holes)
        following = asyncio.ensure_future(follower.run())
        await until_async(lambda: len(seen) == 2, "both frames seen", timeout=5)
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
        assert [(f.sequence, f.text) for f in seen] == [(0, "a"), (3, "d")]
        assert follower.missed == 2
        assert window.read("r1", Cursor(1, 0)).gap
    finally:
        await ledger.close()
        await store.close()


async def test_a_call_over_before_its_first_batch_writes_no_frames(tmp_path: Path) -> None:
    """The pool's ``Forwarder``: a model call that ends within its first batch interval
    writes nothing (its settle follows at once, and the owner's follower reads a batch
    interval after the dispatch at the soonest); one that wrote a batch writes the rest."""
    from stead.runtime.executors._far_progress import Forwarder
    from stead.store import open_store
    from stead.store.ledger._ledger import ledger_for

    store = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    ledger = ledger_for(store)
    try:
        forwarder = Forwarder(ledger, every=0.05)
        forwarder.performing("r1", "fast")
        add = forwarder.begin("r1", 0)
        add("Hel")
        add("lo")
        assert not await forwarder.finish("r1", "fast")
        add("late")  # handed over as the call ended
        await asyncio.sleep(0.2)
        assert await _progress.frames(ledger, "fast", -1) == []

        forwarder.performing("r1", "slow")
        add = forwarder.begin("r1", 1)
        add("Hel")
        # Its first batch is written (within 0.05 s on a quiet machine; a fixed sleep could
        # end while the write was still on its way, and finish() then cancelled it).
        await until_async(
            lambda: _progress.frames(ledger, "slow", -1), "the first batch written", timeout=10
        )
        add("lo")
        assert await forwarder.finish("r1", "slow")
        assert await _progress.frames(ledger, "slow", -1) == [(0, "Hel"), (1, "lo")]
    finally:
        await ledger.close()
        await store.close()


async def test_a_batch_on_its_way_as_the_call_ends_is_written_not_cancelled(pg_url: str) -> None:
    """PostgreSQL, where a batch's write awaits the server: the call ends while its first
    batch is held up (another transaction holds the row's key); ``finish()`` lets that batch
    land and then writes the rest, frames 0 and 1 with no hole. It used to cancel the batch
    in flight, losing frame 0 (the follower counted a hole, the owner saw "lo" alone)."""
    import psycopg

    from stead.runtime.executors._far_progress import Forwarder
    from stead.store import open_store
    from stead.store.ledger._ledger import ledger_for

    store = open_store(pg_url)
    ledger = ledger_for(store)
    insert = (
        "INSERT INTO ledger_progress (effect_id, seq, text, created_at) VALUES ('held', 0, 'x', 0)"
    )
    waiting = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE '%ledger_progress%' AND datname = current_database()"
    )
    try:
        await _progress.publish(ledger, "warm", 0, ["x"], now=0.0)  # the tables are there
        with (
            psycopg.connect(pg_url) as holder,
            psycopg.connect(pg_url, autocommit=True) as watcher,
        ):
            holder.execute(insert)  # uncommitted: an insert of the same key waits for it
            forwarder = Forwarder(ledger, every=0.01)
            forwarder.performing("r1", "held")
            add = forwarder.begin("r1", 0)
            add("Hel")

            def on_its_way() -> bool:  # the first batch, waiting on the lock
                row = watcher.execute(waiting).fetchone()
                return row is not None and row[0] >= 1

            await until_async(on_its_way, "the first batch at the server", timeout=30, every=0.01)
            add("lo")
            finishing = asyncio.ensure_future(forwarder.finish("r1", "held"))
            for _ in range(50):  # finish() reaches the batch in flight
                await asyncio.sleep(0)
            holder.rollback()  # the batch's insert goes ahead
            assert await asyncio.wait_for(finishing, 60)
        assert await _progress.frames(ledger, "held", -1) == [(0, "Hel"), (1, "lo")]
    finally:
        await ledger.close()
        await store.close()
