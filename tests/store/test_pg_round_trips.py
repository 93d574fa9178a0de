"""What an append costs PostgreSQL on the wire: counted in the protocol, never timed.

The store's one pooled connection is traced by libpq (``PGconn.trace``): every message is a
line. The server ends each response the client waits for with ``ReadyForQuery`` (after a
``Sync``, or after a simple ``Query`` such as a bare BEGIN), so those are round trips; a
``Parse`` or ``Query`` carries a statement's text.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _builders import T0, seeded
from psycopg.pq import Trace

from stead.core.events import ModelCallFailed
from stead.store.postgres import PostgresStore

pytestmark = pytest.mark.timeout(60)


class Wire:
    """The messages on a store's only connection between ``start`` and ``take``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = path.open("w")
        self.seen = 0

    async def start(self, store: PostgresStore) -> None:
        async with store._conn() as conn:  # the pool's only connection
            conn.pgconn.trace(self.file.fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)

    async def take(self, store: PostgresStore) -> list[str]:
        async with store._conn() as conn:
            conn.pgconn.untrace()  # flushes libpq's buffer
        text = self.path.read_text()
        new, self.seen = text[self.seen :], len(text)
        return new.splitlines()  # our own checkouts of the connection sent nothing


@pytest.fixture
async def traced(pg_url: str, tmp_path: Path) -> AsyncIterator[tuple[PostgresStore, Wire]]:
    store = PostgresStore(pg_url, min_size=1, max_size=1)
    wire = Wire(tmp_path / "wire.log")
    try:
        yield store, wire
    finally:
        await store.close()
        wire.file.close()


def failed(i: int) -> ModelCallFailed:
    return ModelCallFailed(turn_index=0, attempt=i, code="rate_limited", message=f"try {i}")


def round_trips(wire: list[str]) -> int:
    return sum(1 for line in wire if line.split("\t")[::2] == ["B", "ReadyForQuery"])


async def test_a_batch_of_appends_is_one_round_trip(traced: tuple[PostgresStore, Wire]) -> None:
    store, wire = traced
    bs = [await seeded(store, f"run-{i}") for i in range(7)]
    await wire.start(store)
    seqs = await asyncio.gather(
        *(
            store.append(b.run_id, [failed(1)], expected_seq=b.written, epoch=0,
                         status=b.status, now=T0)
            for b in bs
        )
    )  # fmt: skip
    sent = await wire.take(store)
    assert seqs == [b.written + 1 for b in bs]
    assert store.group.batches == 1
    # BEGIN, the seven statements and COMMIT pipelined, one Sync: one round trip (it was
    # three: BEGIN, the pipelined statements, COMMIT).
    assert round_trips(sent) == 1, sent


async def test_a_short_append_sends_its_rows_as_scalars(
    traced: tuple[PostgresStore, Wire],
) -> None:
    store, wire = traced
    (b,) = [await seeded(store, "run-1")]
    await wire.start(store)
    for n in (1, 2, 16):
        b.written = await store.append(
            b.run_id, [failed(i) for i in range(n)], expected_seq=b.written, epoch=0,
            status=b.status, now=T0,
        )  # fmt: skip
        sent = await wire.take(store)
        assert round_trips(sent) == 1  # one append alone: one statement, one round trip
        assert not any("unnest(" in line for line in sent), sent
        await wire.start(store)
    # A long append still sends arrays (one statement whatever its length).
    b.written = await store.append(
        b.run_id, [failed(i) for i in range(17)], expected_seq=b.written, epoch=0,
        status=b.status, now=T0,
    )  # fmt: skip
    sent = await wire.take(store)
    assert round_trips(sent) == 1 and any("unnest(" in line for line in sent)
    events = await store.read_events(b.run_id)
    assert [e.event for e in events[-17:]] == [failed(i) for i in range(17)]


async def test_a_load_is_one_statement(traced: tuple[PostgresStore, Wire]) -> None:
    store, wire = traced
    (b,) = [await seeded(store, "run-1", turns=2)]
    b.tool_turn()
    b.written = await b.flush(store, snapshot=True)
    b.final_turn()
    b.written = await b.flush(store)
    await wire.start(store)
    loaded = await store.load(b.run_id)
    sent = await wire.take(store)
    # The row with its snapshot, and the tail after it: one statement (it was two).
    binds = sum(1 for line in sent if line.split("\t")[::2] == ["F", "Bind"])
    assert (binds, round_trips(sent)) == (1, 1), sent
    assert loaded.record.last_seq == b.written
    assert 0 < loaded.snapshot_seq < b.written
    assert [s.event for s in loaded.tail] == b.log[loaded.snapshot_seq :]


async def test_a_long_runs_load_is_one_statement_with_its_snapshots_pieces(
    traced: tuple[PostgresStore, Wire],
) -> None:
    """A snapshot of 80 messages is stored in pieces (``postgres._chunks``): the load reads them in
    its one statement too."""
    store, wire = traced
    b = await seeded(store, "run-1", turns=40)
    b.tool_turn()
    b.written = await b.flush(store, snapshot=True)
    snapshot = b.state.to_json()
    b.final_turn()
    b.written = await b.flush(store)
    async with store._conn() as conn:
        (pieces,) = await (await conn.execute("SELECT count(*) FROM snapshot_chunks")).fetchone()
    assert pieces == 3  # 2 of the messages, 1 of the turns' usage
    await wire.start(store)
    loaded = await store.load(b.run_id)
    sent = await wire.take(store)
    binds = sum(1 for line in sent if line.split("\t")[::2] == ["F", "Bind"])
    assert (binds, round_trips(sent)) == (1, 1), sent
    assert loaded.snapshot == snapshot
    assert [s.event for s in loaded.tail] == b.log[loaded.snapshot_seq :]
