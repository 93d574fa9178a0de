"""Group commit: the appends of many runs of one process in one transaction.

Each test makes several runs append at the same moment (``asyncio.gather``: every append is
made in the same turn of the event loop, so they form one batch) and counts what reached the
database, never how long it took: on SQLite the COMMIT statements the store's connection ran
(each one fsync of the WAL under ``synchronous=FULL`` unless the store turned it to NORMAL for
it), on PostgreSQL the transactions that wrote the rows (a row's ``xmin`` is the id of the
transaction that wrote it).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend
from _builders import T0, RunBuilder, call_id, result, seeded

from stead.core.events import ModelCallFailed
from stead.errors import Conflict, Fenced
from stead.store import SQLiteStore, Store
from stead.testing import SQLiteCommits

pytestmark = pytest.mark.timeout(60)

PIPE = asyncio.subprocess.PIPE


def transactions(backend: Backend, run_ids: Sequence[str], after: int) -> int:
    """Distinct transactions that wrote the runs' events after seq ``after`` (PostgreSQL)."""
    rows = backend.sql(
        "SELECT count(DISTINCT xmin::text) FROM events WHERE run_id = ANY(?) AND seq > ?",
        list(run_ids),
        after,
    )
    return int(rows[0][0])


def failed(i: int) -> ModelCallFailed:
    return ModelCallFailed(turn_index=0, attempt=i, code="rate_limited", message=f"try {i}")


async def runs(store: Store, n: int) -> list[RunBuilder]:
    return [await seeded(store, f"run-{i}") for i in range(n)]


async def append(
    store: Store, b: RunBuilder, *, epoch: int = 0, expected: int | None = None, sync: bool = True
) -> int:
    return await store.append(
        b.run_id,
        [failed(1)],
        expected_seq=b.written if expected is None else expected,
        epoch=epoch,
        status=b.status,
        now=T0 + 5,
        sync=sync,
    )


def counter(backend: Backend, store: Store) -> SQLiteCommits | None:
    return SQLiteCommits(store) if isinstance(store, SQLiteStore) else None


async def test_appends_of_eight_runs_at_once_are_one_transaction_and_one_fsync(
    store: Store, backend: Backend
) -> None:
    bs = await runs(store, 8)
    before = bs[0].written
    commits = counter(backend, store)
    seqs = await asyncio.gather(*(append(store, b) for b in bs))
    assert seqs == [before + 1] * 8
    for b in bs:
        assert (await store.get_run(b.run_id)).last_seq == before + 1
        assert (await store.read_events(b.run_id, before))[0].event == failed(1)
    if commits is not None:
        assert (commits.commits, commits.fsyncs) == (1, 1)
    else:
        assert transactions(backend, [b.run_id for b in bs], before) == 1
    assert store.group.batches == 1  # type: ignore[attr-defined]


async def test_a_batch_of_unsynced_appends_does_not_fsync(store: Store, backend: Backend) -> None:
    bs = await runs(store, 4)
    commits = counter(backend, store)
    await asyncio.gather(*(append(store, b, sync=False) for b in bs))
    if commits is not None:
        assert (commits.commits, commits.fsyncs) == (1, 0)
    # One synced member makes the whole batch synced: its commit must wait for the disk.
    commits = counter(backend, store)
    for b in bs:
        b.written += 1
    await asyncio.gather(*(append(store, b, sync=i == 2) for i, b in enumerate(bs)))
    if commits is not None:
        assert (commits.commits, commits.fsyncs) == (1, 1)


async def test_one_run_alone_never_waits_for_a_batch(store: Store, backend: Backend) -> None:
    (b,) = await runs(store, 1)
    commits = counter(backend, store)
    for _ in range(5):
        b.written = await append(store, b)
    assert store.group.batches == 0  # type: ignore[attr-defined]
    if commits is not None:
        assert (commits.commits, commits.fsyncs) == (5, 5)


async def test_a_refused_append_in_a_batch_leaves_the_others_committed(
    store: Store, backend: Backend
) -> None:
    bs = await runs(store, 5)
    before = bs[0].written
    stale = await store.claim("run-1", owner="w2", now=T0, ttl=60)  # run-1's epoch moves on
    assert stale == 1
    commits = counter(backend, store)
    outcomes: list[Any] = await asyncio.gather(
        append(store, bs[0]),
        append(store, bs[1], epoch=0),  # fenced: another owner took the run
        append(store, bs[2]),
        append(store, bs[3], expected=before - 1),  # stale sequence
        append(store, bs[4]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], Fenced) and "run-1" in str(outcomes[1])
    assert isinstance(outcomes[3], Conflict) and "run-3" in str(outcomes[3])
    assert [outcomes[i] for i in (0, 2, 4)] == [before + 1] * 3
    for i, b in enumerate(bs):
        expected = before if i in (1, 3) else before + 1
        assert (await store.get_run(b.run_id)).last_seq == expected
        assert len(await store.read_events(b.run_id)) == expected
    if commits is not None:
        assert commits.commits == 1  # the refusals were decided inside the one batch
    else:
        assert transactions(backend, ["run-0", "run-2", "run-4"], before) == 1
    assert store.group.batches == 1  # type: ignore[attr-defined]


async def test_a_second_result_in_a_batch_fails_its_run_alone(
    store: Store, backend: Backend
) -> None:
    """A unique index refusing one member's row fails the batch's transaction as a whole:
    the batch is rolled back and each member written on its own, so only the run at fault
    is refused."""
    bs = await runs(store, 3)  # each with its turn's call answered
    before = bs[0].written
    second = result(0, call_id(0, 0), content="second")  # past the fold, on purpose
    outcomes: list[Any] = await asyncio.gather(
        append(store, bs[0]),
        store.append(
            "run-1", [second], expected_seq=before, epoch=0, status="awaiting_tool", now=T0
        ),
        append(store, bs[2]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], Conflict) and "already recorded" in str(outcomes[1])
    assert outcomes[0] == outcomes[2] == before + 1
    assert (await store.get_run("run-1")).last_seq == before
    assert [(await store.get_run(r)).last_seq for r in ("run-0", "run-2")] == [before + 1] * 2


async def test_two_appends_of_one_run_in_a_batch_are_checked_in_order(store: Store) -> None:
    """A steering writer and the owner appending the same run at once: the first in the
    batch wins the sequence, the second meets a Conflict, as one after the other would."""
    bs = await runs(store, 2)
    before = bs[0].written
    outcomes: list[Any] = await asyncio.gather(
        append(store, bs[1]), append(store, bs[0]), append(store, bs[0]), return_exceptions=True
    )
    assert outcomes[:2] == [before + 1] * 2
    assert isinstance(outcomes[2], Conflict)
    assert (await store.get_run("run-0")).last_seq == before + 1


async def test_a_cancelled_caller_before_its_batch_writes_nothing(store: Store) -> None:
    bs = await runs(store, 3)
    before = bs[0].written
    tasks = [asyncio.ensure_future(append(store, b)) for b in bs]
    await asyncio.sleep(0)  # every append is queued; the batch has not started
    tasks[1].cancel()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(outcomes[1], asyncio.CancelledError)
    assert [(await store.get_run(b.run_id)).last_seq for b in bs] == [
        before + 1,
        before,
        before + 1,
    ]


@pytest.mark.parametrize("pace", ["inf", "0"], ids=["on-the-loop", "on-the-thread"])
async def test_a_sigkill_between_a_batchs_commit_and_its_acknowledgement_loses_nothing_acknowledged(
    backend: Backend, pace: str
) -> None:
    """A real process appends to six runs at once, round after round, and prints each
    append the store acknowledged; it is SIGKILLed right after its third batch committed,
    before any caller of that batch heard. Every acknowledged event is in the store, and so
    is the batch that committed unacknowledged (a crash there loses nothing either). On
    SQLite, with the batches committed on the loop and on the writer thread (``Pace``)."""
    if backend.name != "sqlite" and pace == "0":
        pytest.skip("PostgreSQL has no writer thread: one case is enough")
    child = Path(__file__).parent / "_batch_child.py"
    extra = [pace] if backend.name == "sqlite" else []
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(child), backend.url, "6", "3", *extra, stdout=PIPE, stderr=PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err.decode()
    acked: dict[str, int] = {}
    committed: list[str] = []
    for line in out.decode().splitlines():
        word, *rest = line.split()
        if word == "ack":
            acked[rest[0]] = max(acked.get(rest[0], 0), int(rest[1]))
        elif word == "committed":
            committed = rest
    assert len(committed) == 6 and len(acked) == 6  # the kill came after some acks
    store = backend.open()
    for run_id, seq in acked.items():
        events = await store.read_events(run_id)
        assert len(events) >= seq  # nothing acknowledged is lost
        # The killed batch committed the next event of each run, which nobody was told of.
        assert (await store.get_run(run_id)).last_seq == seq + (run_id in committed)
