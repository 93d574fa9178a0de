"""Where SQLite commits a durable batch: on the loop while the disk is fast.

On the writer thread a batch's commit costs its members two hand-offs (the GIL back to the
thread, then the loop's turn to hear of it); on the loop it costs the fsync and nothing else,
but stops every other run meanwhile. ``Pace`` chooses by the wall time of the latest ``COMMIT``
on the loop. These tests pin a branch through ``Pace.limit`` (``math.inf``: always the loop;
a nanosecond: every commit "slow"), and see which thread ran each ``COMMIT`` (SQLite's trace
hook) and in which turn of the loop each caller returned. Nothing is timed.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _builders import seeded
from test_sqlite_writer import HeldCommit, append

from stead.store import SQLiteStore
from stead.store.sqlite._writer import PROBE_AFTER, Pace
from stead.testing import SQLiteCommits

pytestmark = pytest.mark.timeout(60)


def threads(store: SQLiteStore) -> HeldCommit:
    """A trace hook, never armed, noting the thread of each write transaction's COMMIT."""
    held = HeldCommit()
    store._trace(held.hook)
    return held


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "runs.db")
    yield s
    await s.close()


LOOP = threading.current_thread().name
WRITER = "stead-sqlite-writer"


async def test_a_batch_on_a_fast_disk_commits_on_the_loop_and_its_callers_return_a_turn_later(
    store: SQLiteStore,
) -> None:
    """Four runs' appends made in one turn are one batch, committed on the loop by the
    group's task in the next turn; its callers run again in the turn after that (on the
    thread it takes at least two turns more: the thread's news, then the telling). No
    writer thread is started."""
    store.pace.limit = math.inf
    bs = [await seeded(store, f"run-{i}") for i in range(4)]
    after = [b.written + 1 for b in bs]
    commits = SQLiteCommits(store)
    appends = [asyncio.ensure_future(append(store, b)) for b in bs]
    turns = 0
    while not all(a.done() for a in appends):
        await asyncio.sleep(0)
        turns += 1
    assert [a.result() for a in appends] == after
    # Turn 1 makes the appends; turn 2 writes and commits the batch, telling its callers;
    # turn 3 returns to them (this task's turn comes after theirs).
    assert turns == 3
    assert (commits.commits, commits.fsyncs, store.group.batches) == (1, 1, 1)
    assert store._writer is None  # so the loop's thread committed it


async def test_a_slow_commit_on_the_loop_sends_the_next_batches_to_the_thread(
    store: SQLiteStore,
) -> None:
    """Commits on the loop longer than the limit (here every one: a nanosecond, each counted
    as twice that) raise the average past it at the sixth; the next ``PROBE_AFTER`` durable
    batches commit on the writer thread, the one after on the loop again (a probe, which
    alone decides: slow, so the thread again). Each batch is two runs' appends at once."""
    store.pace.limit = 1e-9
    bs = [await seeded(store, f"run-{i}") for i in range(2)]
    held = threads(store)
    for i in range(6 + PROBE_AFTER + 2):
        await asyncio.gather(*(append(store, b, i + 1) for b in bs))
    assert held.threads == [LOOP] * 6 + [WRITER] * PROBE_AFTER + [LOOP, WRITER]
    assert store.group.batches == 6 + PROBE_AFTER + 2
    for b in bs:
        assert (await store.get_run(b.run_id)).last_seq == b.written


async def test_every_batch_on_the_thread_with_limit_zero(store: SQLiteStore) -> None:
    """``limit = 0``: no batch commits on the loop (a disk known to be slow)."""
    store.pace.limit = 0
    bs = [await seeded(store, f"run-{i}") for i in range(3)]
    held = threads(store)
    for i in range(3):
        await asyncio.gather(*(append(store, b, i + 1) for b in bs))
    assert held.threads == [WRITER] * 3


def test_pace_averages_the_loops_commits_and_probes_after_the_thread() -> None:
    """``Pace`` on its own: one slow commit among fast ones keeps the loop (the average);
    slow ones in a row give the thread the next ``PROBE_AFTER`` batches; then one is tried on
    the loop, and its time alone decides: fast, the loop again; slow, the thread again."""
    pace = Pace(limit=0.001)
    assert [pace.on_loop() for _ in range(3)] == [True] * 3
    pace.took(0.0002)
    pace.took(0.004)
    assert pace.on_loop()
    for _ in range(8):
        pace.took(0.004)
    assert [pace.on_loop() for _ in range(PROBE_AFTER)] == [False] * PROBE_AFTER
    assert pace.on_loop()  # the probe
    pace.took(0.0002)
    assert pace.on_loop() and pace.on_loop()
    for _ in range(8):
        pace.took(0.004)
    assert [pace.on_loop() for _ in range(PROBE_AFTER)] == [False] * PROBE_AFTER
    assert pace.on_loop()
    pace.took(0.004)  # a slow probe
    assert not pace.on_loop()
    assert not Pace(limit=0).on_loop()
