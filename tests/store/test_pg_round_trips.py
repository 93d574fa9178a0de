"""What an append costs PostgreSQL on the wire: counted in the protocol, never timed.

The store's one pooled connection is traced by libpq (``PGconn.trace``): every message is a
line. The server ends each response the client waits for with ``ReadyForQuery`` (after a
``Sync``, or after a simple ``Query`` such as a bare BEGIN), so those are round trips; a
``Parse`` or ``Query`` carries a statement's text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from _builders import T0, seeded
from psycopg.pq import Trace

import stead
from stead.core.events import ModelCallFailed
from stead.store.postgres import PostgresStore
from stead.testing import Reply, ScriptedModel

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


async def test_the_loads_of_one_turn_are_one_statement(traced: tuple[PostgresStore, Wire]) -> None:
    """A worker starts the runs it claimed together in one turn: their loads are read in one
    round trip, each caller given its own run (and a run that is not there, its own
    ``RunNotFound``)."""
    store, wire = traced
    bs = [await seeded(store, f"run-{i}", turns=i) for i in range(5)]
    await wire.start(store)
    got = await asyncio.gather(
        *(store.load(b.run_id) for b in bs), store.load("run-none"), return_exceptions=True
    )
    sent = await wire.take(store)
    assert round_trips(sent) == 1, sent
    assert isinstance(got[-1], stead.RunNotFound)
    for b, loaded in zip(bs, got[:-1], strict=True):
        assert isinstance(loaded, stead.store.Loaded)
        assert loaded.record.run_id == b.run_id
        assert [s.event for s in loaded.tail] == b.log


async def test_the_releases_of_one_turn_are_one_statement(
    traced: tuple[PostgresStore, Wire],
) -> None:
    """Runs that finish together release their leases in one round trip; each lease is
    released only by its holder at its epoch, as alone."""
    store, wire = traced
    ids = [(await seeded(store, f"run-{i}")).run_id for i in range(4)]
    epochs = [await store.claim(r, owner="w1", now=T0, ttl=60) for r in ids]
    await wire.start(store)
    await asyncio.gather(
        *(store.release(r, owner="w1", epoch=e) for r, e in zip(ids[:2], epochs, strict=False)),
        store.release(ids[2], owner="w2", epoch=epochs[2]),  # not its holder
        store.release(ids[3], owner="w1", epoch=epochs[3] - 1),  # an old epoch
    )
    sent = await wire.take(store)
    assert round_trips(sent) == 1, sent
    owners = [(await store.get_run(r)).lease_owner for r in ids]
    assert owners == [None, None, "w1", "w1"]


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


# -- a run's steps, through the Runtime --------------------------------------------------------


@stead.tool(effect="read_only")
async def lookup(order_id: int) -> dict[str, int]:
    """Look up an order."""
    return {"order_id": order_id}


def agent(turns: int, durability: str) -> stead.Agent:
    replies: list[Reply | str] = [
        Reply(tool_calls=[("lookup", {"order_id": i})]) for i in range(turns)
    ]
    replies.append("Done.")
    return stead.Agent(f"a{turns}", ScriptedModel(replies), [lookup],
                       durability=durability)  # type: ignore[arg-type]  # fmt: skip


async def trips_of_a_run(rt: stead.Runtime, wire: Wire, a: stead.Agent) -> int:
    """Round trips on the store's one connection while ``a``'s run is driven start to end."""
    store = rt.store
    assert isinstance(store, PostgresStore)
    run_id = await rt.start(a, "go")
    await wire.start(store)
    view = await rt.run(run_id)
    sent = await wire.take(store)
    assert view.status is stead.RunStatus.COMPLETED
    return round_trips(sent)


@pytest.mark.parametrize(("durability", "per_step"), [("strict", 1), ("effects", 0)])
async def test_a_durable_step_is_one_round_trip(
    traced: tuple[PostgresStore, Wire], durability: str, per_step: int
) -> None:
    """Two runs that differ by three tool turns (six durable steps: three model calls, three
    tool calls): what a run costs once (its lease, its end) cancels out, and what is left is
    what a step costs in steady state. ``strict``: its append and nothing beside it (the
    lease is renewed by the keeper, for all runs at once; notices ride in the append).
    ``effects`` with a read_only tool: nothing until the run's end. A run first warms the
    connection: psycopg prepares a statement at its fifth use, in a round trip of its own,
    once per connection."""
    store, wire = traced
    short, long = agent(2, durability), agent(5, durability)
    async with stead.Runtime(store, agents=[short, long], lease_ttl=600) as rt:
        rt.watch_interval = 600.0  # the keeper (a timed read) does not look at a run this short
        await trips_of_a_run(rt, wire, long)
        trips = [await trips_of_a_run(rt, wire, a) for a in (short, long)]
    assert trips[1] - trips[0] == 6 * per_step, trips
    # A whole run: its row read and its lease taken, its appends (strict: the first carries
    # run_started with the first model call's turn; then one a step), its lease released.
    assert trips == ([2 + 6 + 1, 2 + 12 + 1] if durability == "strict" else [2 + 1 + 1] * 2)


async def test_a_claimed_run_is_read_in_its_claim(traced: tuple[PostgresStore, Wire]) -> None:
    """A worker's run: claimed (with others) and read (its row, snapshot and tail) in one
    statement, then one append a step; the worker releases the claim after. What the claim
    read is what a load reads, at the new epoch."""
    store, wire = traced
    a, warm = agent(2, "strict"), agent(5, "strict")
    async with stead.Runtime(store, agents=[a, warm], lease_ttl=600) as rt:
        rt.watch_interval = 600.0
        await trips_of_a_run(rt, wire, warm)  # the statements prepared
        run_id = await rt.start(a, "go")
        await wire.start(store)
        (claim,) = await store.claim_next(owner=rt.owner, now=time.time(), ttl=600.0)
        claimed = await wire.take(store)
        assert claim.loaded == await store.load(run_id)
        assert (claim.epoch, claim.loaded.record.epoch) == (1, 1)
        await wire.start(store)
        view = await rt.run(run_id, claim=claim)
        sent = await wire.take(store)
    assert view.status is stead.RunStatus.COMPLETED
    binds = sum(1 for line in claimed if line.split("\t")[::2] == ["F", "Bind"])
    assert (binds, round_trips(claimed)) == (1, 1), claimed
    # The run's five steps and the first commit (run_started with the first turn): no read.
    assert round_trips(sent) == 6


async def test_a_claim_reads_each_run_it_takes(traced: tuple[PostgresStore, Wire]) -> None:
    """Runs claimed together are each read whole in the claim's one statement (a long one
    with its snapshot's pieces), the least recently updated first."""
    store, wire = traced
    short = await seeded(store, "run-short", turns=1)
    long = await seeded(store, "run-long", turns=40)
    long.tool_turn()
    long.written = await long.flush(store, snapshot=True, now=T0 + 2)
    await wire.start(store)
    claims = await store.claim_next(owner="w1", now=T0, ttl=60.0, limit=5)
    sent = await wire.take(store)
    assert round_trips(sent) == 1, sent
    assert [c.run_id for c in claims] == [short.run_id, long.run_id]
    for c, b in zip(claims, (short, long), strict=True):
        assert c.loaded is not None and c.epoch == 1
        assert c.loaded == await store.load(b.run_id)
        assert c.loaded.record.last_seq == b.written
    assert claims[1].loaded is not None and claims[1].loaded.snapshot is not None
    assert await store.claim_next(owner="w2", now=T0, ttl=60.0, limit=5) == []


async def test_a_damaged_run_is_claimed_without_its_read(
    traced: tuple[PostgresStore, Wire],
) -> None:
    """A run whose log does not read back (an event row gone) is claimed all the same, with
    nothing read (its claimant's own read names the damage, for that run alone); the run
    claimed with it is read as ever."""
    store, _ = traced
    good, bad = [await seeded(store, f"run-{i}", turns=2) for i in range(2)]
    async with store._conn() as conn:
        await conn.execute("DELETE FROM events WHERE run_id = %s AND seq = 3", (bad.run_id,))
    claims = {c.run_id: c for c in await store.claim_next(owner="w1", now=T0, ttl=60.0, limit=5)}
    assert claims[good.run_id].loaded == await store.load(good.run_id)
    assert claims[bad.run_id].loaded is None and claims[bad.run_id].epoch == 1
    with pytest.raises(stead.StoreError, match="missing"):
        await store.load(bad.run_id)


async def test_a_new_connection_is_configured_in_one_round_trip(
    pg_url: str, tmp_path: Path
) -> None:
    store = PostgresStore(pg_url, min_size=1, max_size=1, statement_timeout=4.0, lock_timeout=1.5)
    log = tmp_path / "configure.log"
    try:
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
            with log.open("w") as f:
                conn.pgconn.trace(f.fileno())
                conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
                await store._configure(conn)
                conn.pgconn.untrace()
            cur = await conn.execute(
                "SELECT current_setting('statement_timeout'), current_setting('lock_timeout'),"
                " current_setting('idle_in_transaction_session_timeout')"
            )
            assert await cur.fetchone() == ("4s", "1500ms", "10s")
    finally:
        await store.close()
    assert round_trips(log.read_text().splitlines()) == 1
