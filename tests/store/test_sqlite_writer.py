"""SQLite's writer thread: a batch's commit, and its fsync, off the event loop.

A batch that must be durable is written on the loop and committed on the store's writer
thread (``stead.store.sqlite._writer``). These tests hold that commit inside SQLite's own seam
(the statement trace hook, which SQLite calls on the thread that runs the statement) until
another task on the loop has made progress: if the commit ran on the loop, that task could not
run and the hold would end only at its deadlock guard, failing the test. Nothing is timed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from _builders import T0, RunBuilder, created, seeded

from stead.core.events import ModelCallFailed
from stead.errors import Conflict
from stead.store import SQLiteStore
from stead.store.sql._group import CROWD
from stead.store.sqlite._writer import Writer
from stead.testing import SQLiteCommits

pytestmark = pytest.mark.timeout(60)

GUARD = 10.0
"""How long a held commit waits for the loop at most (a deadlock guard, never reached when
the commit is off the loop)."""


def failed(i: int) -> ModelCallFailed:
    return ModelCallFailed(turn_index=0, attempt=i, code="rate_limited", message=f"try {i}")


async def append(store: SQLiteStore, b: RunBuilder, i: int = 1) -> int:
    b.written = await store.append(
        b.run_id, [failed(i)], expected_seq=b.written, epoch=0, status=b.status, now=T0 + i
    )
    return b.written


class HeldCommit:
    """A trace hook that, once armed, holds the next write transaction's ``COMMIT`` until
    ``release`` is set (or ``GUARD`` passed), and notes on which thread it ran."""

    def __init__(self) -> None:
        self.armed = False
        self.committing = threading.Event()
        self.release = threading.Event()
        self.released_in_time: bool | None = None
        self.threads: list[str] = []  # the thread of each write transaction's COMMIT

    @classmethod
    def armed_on(cls, store: SQLiteStore) -> HeldCommit:
        held = cls()
        store._trace(held.hook)
        held.armed = True
        return held

    async def turns(self) -> None:
        """Once the commit is held, turns of the loop that could not happen if it held the
        loop too."""
        await until(self.committing)
        for _ in range(20):
            await asyncio.sleep(0)

    def hook(self) -> Callable[[str], None]:
        writing = False

        def seen(statement: str) -> None:
            nonlocal writing
            s = statement.upper()
            if s.startswith("BEGIN"):
                writing = "IMMEDIATE" in s
            elif s.startswith("COMMIT") and writing:
                self.threads.append(threading.current_thread().name)
                if self.armed:
                    self.armed = False
                    self.committing.set()
                    self.released_in_time = self.release.wait(GUARD)

        return seen


async def until(flag: threading.Event) -> None:
    """Turn the loop until ``flag`` (set on whichever thread commits) is set."""
    while not flag.is_set():  # noqa: ASYNC110 (set from another thread: polled, on purpose)
        await asyncio.sleep(0)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """A SQLite store only (this file overrides the contract suite's fixture) whose durable
    batches all commit on the writer thread (``Pace.limit`` 0: the slow disk's branch)."""
    s = SQLiteStore(tmp_path / "runs.db")
    s.pace.limit = 0
    yield s
    await s.close()


async def test_the_loop_goes_on_while_a_batch_commits(store: SQLiteStore) -> None:
    """While a batch of four runs' appends commits, another task on the loop makes progress
    and reads the store (which shows the batch not yet committed); the appends return once
    the commit did, and then every read shows them."""
    bs = [await seeded(store, f"run-{i}") for i in range(4)]
    before = bs[0].written
    held = HeldCommit.armed_on(store)
    seen: list[int] = []

    async def meanwhile() -> None:
        await held.turns()
        seen.append((await store.get_run("run-0")).last_seq)
        held.release.set()

    other = asyncio.ensure_future(meanwhile())
    seqs = await asyncio.gather(*(append(store, b) for b in bs))
    await other
    assert held.released_in_time is True
    assert seen == [before]  # read during the commit: not there yet, and the read did not wait
    assert seqs == [before + 1] * 4
    assert [(await store.get_run(b.run_id)).last_seq for b in bs] == [before + 1] * 4
    assert held.threads == ["stead-sqlite-writer"]
    assert store.group.batches == 1


class CountedBegins(HeldCommit):
    """``HeldCommit`` that also counts the write transactions begun, on any connection."""

    def __init__(self) -> None:
        super().__init__()
        self.begun = 0

    def hook(self) -> Callable[[str], None]:
        inner = super().hook()

        def seen(statement: str) -> None:
            if statement.upper().startswith("BEGIN IMMEDIATE"):
                self.begun += 1
            inner(statement)

        return seen


def returned(store: SQLiteStore) -> None:
    """Block the loop (no turn of it) until the batch under way returned on the thread: the
    write lock released, and the thread said so (``Commit.returned``)."""
    lock = store._writes.lock
    pending = getattr(store.group, "_pending", None)

    def committing() -> bool:
        return lock.locked() or (pending is not None and not pending[1].returned)

    deadline = time.monotonic() + GUARD
    while committing() and time.monotonic() < deadline:
        time.sleep(0.001)  # the thread takes the GIL meanwhile
    assert not committing()


async def test_the_next_batch_starts_from_an_append_once_the_commit_returned(
    store: SQLiteStore,
) -> None:
    """Once a batch's ``COMMIT`` returned on the thread, the next append starts the next
    batch itself, in its own turn of the loop: the group's task hears of the commit a turn
    later, and with many runs in flight one turn runs a hundred runs' steps, all that time
    with the thread idle and every later append waiting (bench/in_flight.py, 100 in flight:
    runs moved in lockstep). Nothing is timed: the loop is held still until the thread says
    the commit returned, then turned once."""
    bs = [await seeded(store, f"run-{i}") for i in range(3)]
    held = CountedBegins()
    store._trace(held.hook)
    held.armed = True
    first = asyncio.gather(append(store, bs[0]), append(store, bs[1]))  # a batch of two
    await until(held.committing)
    begun = held.begun
    held.release.set()
    returned(store)
    second = asyncio.ensure_future(append(store, bs[2]))
    await asyncio.sleep(0)  # one turn: the append ran (and the commit's news, maybe)
    assert held.begun == begun + 1  # the next batch began in the append's turn
    assert await first == [bs[0].written, bs[1].written]
    assert await second == bs[2].written
    for b in bs:
        assert (await store.get_run(b.run_id)).last_seq == b.written
    assert held.released_in_time is True
    assert held.threads == ["stead-sqlite-writer"] * 2


async def test_a_batchs_members_are_told_in_the_turn_the_loop_hears_of_its_commit(
    store: SQLiteStore,
) -> None:
    """The loop's callback that hears the commit returned on the thread tells the batch's
    members itself: they run again the turn after, not a turn later still (when the group's
    task, woken by that callback, would have told them). Nothing is timed: the loop is held
    still until the thread returned and queued its callback, then turned one turn at a time."""
    bs = [await seeded(store, f"run-{i}") for i in range(2)]
    after = [b.written + 1 for b in bs]
    held = HeldCommit.armed_on(store)
    appends = [asyncio.ensure_future(append(store, b)) for b in bs]
    await until(held.committing)
    held.release.set()
    returned(store)  # the thread's callback is queued: it runs in the next turn
    await asyncio.sleep(0)  # that turn: the callback tells the members
    assert not any(a.done() for a in appends)
    await asyncio.sleep(0)  # the turn after: each member's append returns
    assert all(a.done() for a in appends)
    assert [a.result() for a in appends] == after
    assert held.threads == ["stead-sqlite-writer"]


async def test_the_loops_callback_starts_the_batch_queued_while_the_commit_ran(
    store: SQLiteStore,
) -> None:
    """An append made while a batch commits on the thread is queued; the loop's callback
    that hears the commit returned starts it as the next batch in that same turn, with no
    append to set it off (the group's task, woken by that callback, would a turn later)."""
    bs = [await seeded(store, f"run-{i}") for i in range(3)]
    held = CountedBegins()
    store._trace(held.hook)
    held.armed = True
    first = [asyncio.ensure_future(append(store, b)) for b in bs[:2]]
    await until(held.committing)
    second = asyncio.ensure_future(append(store, bs[2]))
    await asyncio.sleep(0)  # the append ran: queued behind the commit
    begun = held.begun
    held.release.set()
    returned(store)  # the thread's callback is queued: it runs in the next turn
    await asyncio.sleep(0)
    assert held.begun == begun + 1  # the next batch began in the callback's turn
    await asyncio.gather(*first, second)
    assert (await store.get_run(bs[2].run_id)).last_seq == bs[2].written
    assert held.threads == ["stead-sqlite-writer"] * 2


async def test_an_append_leaves_the_next_batch_to_the_task_while_a_write_waits(
    store: SQLiteStore,
) -> None:
    """A write outside the batches (a claim) waiting for the thread to be idle gets its turn:
    meanwhile an append does not start the next batch itself (under load they would keep
    the thread busy for ever), the group's task does, after the claim took the lock."""
    bs = [await seeded(store, f"run-{i}") for i in range(3)]
    await store.create_run(created("spare"), now=T0)
    held = CountedBegins()
    store._trace(held.hook)
    held.armed = True
    first = asyncio.gather(append(store, bs[0]), append(store, bs[1]))
    await until(held.committing)
    claim = asyncio.ensure_future(store.claim("spare", owner="w1", now=T0, ttl=60))
    await asyncio.sleep(0)  # the claim waits for the thread
    assert store._writer is not None and store._writer.idle_waiters == 1
    begun = held.begun
    held.release.set()
    returned(store)
    second = asyncio.ensure_future(append(store, bs[2]))
    await asyncio.sleep(0)
    assert held.begun == begun  # the append only queued
    await asyncio.gather(first, second, claim)
    assert (await store.get_run("spare")).lease_owner == "w1"
    assert (await store.get_run(bs[2].run_id)).last_seq == bs[2].written


async def test_another_write_waits_for_the_commit_without_stopping_the_loop(
    store: SQLiteStore,
) -> None:
    """A claim (a write outside the batch) made while a batch commits waits for the commit
    to end, but on the loop: a third task keeps going, and releases the commit."""
    bs = [await seeded(store, f"run-{i}") for i in range(3)]
    await store.create_run(created("spare"), now=T0)
    held = HeldCommit.armed_on(store)
    order: list[str] = []

    async def claimer() -> None:
        await until(held.committing)
        order.append("claim starts")
        await store.claim("spare", owner="w1", now=T0, ttl=60)
        order.append("claimed")

    async def ticker() -> None:
        await held.turns()
        order.append("ticked")
        held.release.set()

    tasks = [asyncio.ensure_future(claimer()), asyncio.ensure_future(ticker())]
    await asyncio.gather(*(append(store, b) for b in bs))
    await asyncio.gather(*tasks)
    assert held.released_in_time is True
    assert order == ["claim starts", "ticked", "claimed"]
    assert (await store.get_run("spare")).lease_owner == "w1"


async def test_a_run_alone_never_starts_the_writer_thread(store: SQLiteStore) -> None:
    """One run after another (``bench/overhead.py``'s case) commits on the loop, as before:
    no thread, no hand-off."""
    for i in range(3):
        b = await seeded(store, f"run-{i}")
        for j in range(4):
            await append(store, b, j + 1)
    assert store._writer is None
    assert not [t for t in threading.enumerate() if t.name == "stead-sqlite-writer"]


async def test_a_queued_append_alone_commits_on_the_thread_while_others_append_lately(
    store: SQLiteStore,
) -> None:
    """After a batch of several runs, an append of yet another run (queued: it is not the run
    of the append before) is a batch of one committed on the writer thread; once ``CROWD``
    such appends went by with no other run beside them, one is committed on the loop again."""
    bs = [await seeded(store, f"run-{i}") for i in range(3)]
    held = HeldCommit()
    store._trace(held.hook)
    await asyncio.gather(*(append(store, b) for b in bs))
    for i in range(CROWD + 1):  # alternate runs: each append is queued, each alone
        await append(store, bs[i % 2], i + 2)
    loop_thread = threading.current_thread().name
    assert held.threads == ["stead-sqlite-writer"] * (CROWD + 1) + [loop_thread]
    assert store.group.batches == 1


async def test_the_writer_thread_ends_with_its_store(tmp_path: Path) -> None:
    """``close`` joins the thread; a writer dropped without it (its store dropped unclosed)
    ends its thread too (``weakref.finalize``; nothing else holds it)."""
    store = SQLiteStore(tmp_path / "runs.db")
    store.pace.limit = 0
    bs = [await seeded(store, f"run-{i}") for i in range(2)]
    await asyncio.gather(*(append(store, b) for b in bs))
    assert store._writer is not None
    thread = store._writer._thread
    assert thread.is_alive()
    await store.close()
    assert not thread.is_alive() and store._writer is None
    writer = Writer(sqlite3.connect(tmp_path / "runs.db", check_same_thread=False))
    thread, db = writer._thread, writer.db
    del writer  # no cycle holds it: dropped at once
    thread.join(GUARD)
    assert not thread.is_alive()
    db.close()


async def test_fsyncs_of_batches_on_the_thread_are_counted(store: SQLiteStore) -> None:
    """``SQLiteCommits`` sees the writer's connection too (made after it was set up)."""
    commits = SQLiteCommits(store)
    bs = [await seeded(store, f"run-{i}") for i in range(5)]
    created = commits.commits
    await asyncio.gather(*(append(store, b) for b in bs))
    assert (commits.commits - created, store.group.batches) == (1, 1)


async def test_runs_started_at_once_are_created_in_one_batch(store: SQLiteStore) -> None:
    """A burst of ``create_run`` (many ``rt.start`` at once): the first is written at once,
    the others, started before it appended anything, in one batch; a duplicate among them
    is refused alone."""
    commits = SQLiteCommits(store)
    await store.create_run(created("twice"), now=T0)
    outcomes = await asyncio.gather(
        *(store.create_run(created(f"run-{i}"), now=T0) for i in range(6)),
        store.create_run(created("twice"), now=T0),
        return_exceptions=True,
    )
    assert outcomes[:6] == [None] * 6
    assert isinstance(outcomes[6], Conflict) and "already exists" in str(outcomes[6])
    # The burst's batch failed as a whole on the duplicate; each member was then written
    # on its own, so only the duplicate was refused.
    listed = {r.run_id: r.last_seq for r in await store.list_runs()}
    assert listed == {"twice": 1, **{f"run-{i}": 1 for i in range(6)}}
    for run_id in listed:
        assert [e.seq for e in await store.read_events(run_id)] == [1]
    commits_before = commits.commits
    await asyncio.gather(*(store.create_run(created(f"more-{i}"), now=T0) for i in range(5)))
    assert commits.commits - commits_before == 1  # a burst after a burst: one batch
