"""The database dies mid-run: PostgreSQL's postmaster and every backend get SIGKILL.

A worker drives a run of an agent with one tool of each effect class, one per turn:
``lookup_order`` (read_only), ``upsert_ticket`` (idempotent_write), ``send_message``
(non_idempotent; its reconcile asks the message service by idempotency key), then the
answer. The run is held at one point while the server (a durable one of the test's own, see
``crashable_postgres``) is killed: inside a tool's handler after its effect happened, or while
the model is answering, between two steps. Then:

(a) the worker's ``Runtime.run`` raises ``StoreError`` naming the server and the reason, at
    once (not after the pool's 30 s timeout), and nothing from psycopg reaches the caller
    but as the ``StoreError``'s cause;
(b) the server is started again on the same data directory; a fresh ``Runtime`` (a new store,
    as a restarted worker has) resumes the run to completion;
(c) every event whose append had returned to the worker before the kill is in the log, at
    its sequence, unchanged;
(d) the message went out exactly once; the read_only and idempotent_write tools ran again
    (with the same idempotency key) only where their result died with the server; every tool
    call has exactly one result.

A second test kills and restarts the server while a handler runs and the worker does not
touch the database but to renew its lease: the worker keeps the lease and finishes the run.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

import stead
from _wait import until_async
from stead.core.canonical import idempotency_key
from stead.core.events import Event, RunCreated, RunRecovered, ToolReconciled, ToolResultRecorded
from stead.core.states import RunStatus
from stead.errors import StoreError
from stead.providers import ModelCall, ModelResponse
from stead.store import Store
from stead.store.postgres import PostgresStore
from stead.testing import PostgresServer, Reply, ScriptedModel, SideEffects, assert_valid_history

pytestmark = pytest.mark.timeout(60)

LEASE = 1.0
"""The killed worker's lease: it cannot release it with the server gone, so the fresh
runtime waits this long at most before it may claim the run."""
OUTLIVING = 12.0
"""A lease that outlives a restart of the server: a worker stops trusting its lease once
no renewal was confirmed for its TTL less the margin (9 s of this one), so a lease shorter
than the restart takes would be given up, rightly, while the server was away."""
ANSWER = "Order 42 shipped; ticket updated; on-call told."


class Hold:
    """Where the run is held while the server is killed: the first time the run reaches
    ``point`` it says so and waits for ``resume``."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.reached = asyncio.Event()
        self.resume = asyncio.Event()

    async def at(self, point: str) -> None:
        if point == self.point and not self.reached.is_set():
            self.reached.set()
            await asyncio.wait_for(self.resume.wait(), 30)


HOLD = Hold("")
SIDE_EFFECTS: SideEffects | None = None


def side_effects() -> SideEffects:
    assert SIDE_EFFECTS is not None
    return SIDE_EFFECTS


@stead.tool(effect="read_only")
async def lookup_order(order_id: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Look up an order's status."""
    side_effects().record("lookup_order", ctx.idempotency_key, attempt=ctx.attempt)
    await HOLD.at("lookup_order")
    return {"order_id": order_id, "status": "shipped"}


@stead.tool(effect="idempotent_write")
async def upsert_ticket(order_id: int, note: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Create or update the order's support ticket (deduplicated by idempotency key)."""
    side_effects().record("upsert_ticket", ctx.idempotency_key, attempt=ctx.attempt)
    await HOLD.at("upsert_ticket")
    return {"ticket": f"T-{order_id}", "note": note}


def find_message(recipient: str, body: str, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
    """Reconcile: ask the message service whether this call's message went out."""
    sent = side_effects().entries("send_message")
    mine = [e for e in sent if e["key"] == ctx.idempotency_key]
    return stead.Done({"message_id": mine[0]["id"]}) if mine else stead.NotDone()


@stead.tool(effect="non_idempotent", reconcile=find_message)
async def send_message(recipient: str, body: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Send a message; the service (the ledger) gives every call a new message id."""
    message_id = side_effects().record("send_message", ctx.idempotency_key, to=recipient)
    await HOLD.at("send_message")
    return {"message_id": message_id}


class HeldModel:
    """The scripted model, held at ``model#<turn>`` before it answers that turn."""

    def __init__(self) -> None:
        self.script = ScriptedModel(
            [
                Reply(tool_calls=[("lookup_order", {"order_id": 42})]),
                Reply(tool_calls=[("upsert_ticket", {"order_id": 42, "note": "shipped"})]),
                Reply(tool_calls=[("send_message", {"recipient": "oncall", "body": "42 left"})]),
                ANSWER,
            ]
        )

    @property
    def model_name(self) -> str:
        return self.script.model_name

    async def complete(self, call: ModelCall) -> ModelResponse:
        request, signal, on_progress = call.request, call.signal, call.on_progress
        await HOLD.at(f"model#{request.turn_index}")
        return await self.script.complete(ModelCall(request, signal, on_progress))


def agent() -> stead.Agent:
    return stead.Agent("db-killed", HeldModel(), [lookup_order, upsert_ticket, send_message])


class Acked:
    """A store that notes every event whose write returned: what the worker was told is
    committed. Everything else is the real store's."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.events: dict[int, Event] = {}
        """seq -> event, for the one run of the test."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def create_run(self, event: RunCreated, *, now: float) -> None:
        await self.store.create_run(event, now=now)
        self.events[1] = event

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, **kw: Any
    ) -> int:
        seq = await self.store.append(run_id, events, expected_seq=expected_seq, **kw)
        self.events.update(enumerate(events, start=expected_seq + 1))
        return seq


async def _drive_until_held(
    worker: stead.Runtime, where: str
) -> tuple[str, asyncio.Future[stead.RunView]]:
    """Start a run and drive it in the background until it blocks at the hold point."""
    run_id = await worker.start("db-killed", "Handle order 42")
    driving = asyncio.ensure_future(worker.run(run_id))
    held = asyncio.ensure_future(HOLD.reached.wait())
    await asyncio.wait({driving, held}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
    held.cancel()
    assert HOLD.reached.is_set(), f"the run never reached {where}: {driving}"
    return run_id, driving


POINTS = ["lookup_order", "upsert_ticket", "send_message", "model#2"]
CALLS = {"lookup_order": "call_0_0", "upsert_ticket": "call_1_0", "send_message": "call_2_0"}


@pytest.mark.parametrize("point", POINTS)
async def test_postgres_killed_mid_run_then_restarted(
    crashable_postgres: PostgresServer, crashable_pg_url: str, tmp_path: Path, point: str
) -> None:
    global HOLD, SIDE_EFFECTS
    HOLD, SIDE_EFFECTS = Hold(point), SideEffects(tmp_path / "effects.db")
    server, url = crashable_postgres, crashable_pg_url
    where = f"127.0.0.1:{server.port}"

    # -- the worker, and the kill --------------------------------------------------------------
    acked = Acked(PostgresStore(url))
    worker = stead.Runtime(acked, agents=[agent()], lease_ttl=LEASE)
    run_id, driving = await _drive_until_held(worker, point)
    postmaster = server.pid
    await asyncio.to_thread(server.kill)
    HOLD.resume.set()

    # (a) a typed error, at once, naming the server and the reason.
    try:
        with pytest.raises(StoreError) as raised:
            await asyncio.wait_for(driving, 10)  # the pool alone would wait 30 s per call
    finally:
        await asyncio.wait_for(worker.close(), 10)
    error = raised.value
    assert where in str(error), error
    assert not isinstance(error, psycopg.Error)
    assert isinstance(error.__cause__, psycopg.Error)  # translated at the boundary, kept as cause

    # -- (b) the server comes back on the same data; a fresh runtime finishes the run ------------
    await asyncio.to_thread(server.start)
    assert server.pid != postmaster
    store = PostgresStore(url)
    try:
        async with stead.Runtime(store, agents=[agent()]) as fresh:

            async def lease_lapsed() -> bool:
                return ((await store.get_run(run_id)).lease_expires_at or 0) < time.time()

            await until_async(lease_lapsed, "the dead worker's lease to lapse", timeout=10)
            view = await asyncio.wait_for(fresh.run(run_id), 20)
            assert (view.status, view.output) == (RunStatus.COMPLETED, ANSWER)

            # (c) what the worker was told is committed survived, unchanged.
            log = {e.seq: e.event for e in await fresh.events(run_id)}
            told_committed = acked.events
            assert len(told_committed) >= 5, told_committed  # created ... the held call's intent
            for seq, event in told_committed.items():
                assert log.get(seq) == event, f"seq {seq} ({event.kind}) did not survive"
            recovered = [e for e in log.values() if isinstance(e, RunRecovered)]
            assert [r.previous_owner for r in recovered] == [worker.owner]

            # (d) effects: the message once; reruns only where a result was lost, same key.
            state = await fresh.state(run_id)
            assert_valid_history(state)
            results = Counter(
                e.tool_call_id for e in log.values() if isinstance(e, ToolResultRecorded)
            )
            assert results == Counter(CALLS.values())
            side_effects().assert_exactly_once(
                "send_message", idempotency_key(run_id, CALLS["send_message"])
            )
            assert side_effects().count("send_message") == 1
            for tool, call in CALLS.items():
                keys = set(side_effects().keys(tool))
                assert keys == {idempotency_key(run_id, call)}, tool
                if tool != "send_message":
                    assert side_effects().count(tool) == (2 if tool == point else 1), tool
            verdicts = [e.verdict for e in log.values() if isinstance(e, ToolReconciled)]
            if point == "send_message":
                assert verdicts == ["done"]  # the service said it went out: recorded, not resent
                [sent] = [
                    e
                    for e in log.values()
                    if isinstance(e, ToolResultRecorded) and e.tool_call_id == CALLS[point]
                ]
                assert sent.source == "reconciled"
            else:
                assert verdicts == []
    finally:
        await store.close()


async def test_postgres_restarted_while_a_tool_runs_the_worker_keeps_its_lease(
    crashable_postgres: PostgresServer, crashable_pg_url: str, tmp_path: Path
) -> None:
    """The server dies and comes back while a handler runs; the worker meets the dead server
    only in its heartbeat. The same ``Runtime.run`` carries on: its lease is renewed after the
    restart (a heartbeat that gave up on the first failed renewal would let the lease lapse
    under a live worker, and another worker take the run over while the tool still ran), and
    it records the result and finishes the run."""
    global HOLD, SIDE_EFFECTS
    HOLD, SIDE_EFFECTS = Hold("upsert_ticket"), SideEffects(tmp_path / "effects.db")
    server, url = crashable_postgres, crashable_pg_url
    store, observer = PostgresStore(url), PostgresStore(url)
    try:
        async with stead.Runtime(store, agents=[agent()], lease_ttl=OUTLIVING) as worker:
            run_id, driving = await _drive_until_held(worker, "the tool")

            await asyncio.to_thread(server.kill)
            await asyncio.sleep(1.0)  # the keeper's beats (5 a second) meet the dead server
            await asyncio.to_thread(server.start)
            restarted = time.time()

            async def renewed_since_restart() -> bool:
                # Later than any renewal made before the kill, a second or more before.
                lease = (await observer.get_run(run_id)).lease_expires_at or 0
                return lease > restarted + OUTLIVING - 1

            await until_async(renewed_since_restart, "the heartbeat to renew the lease", timeout=20)
            HOLD.resume.set()
            view = await asyncio.wait_for(driving, 20)
            assert (view.status, view.output) == (RunStatus.COMPLETED, ANSWER)
            assert [side_effects().count(t) for t in CALLS] == [1, 1, 1]
            log = [e.event for e in await worker.events(run_id)]
            assert not [e for e in log if isinstance(e, RunRecovered)]  # nobody took it over
            assert_valid_history(await worker.state(run_id))
    finally:
        await observer.close()
