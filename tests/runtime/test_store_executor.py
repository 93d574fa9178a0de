"""``StoreExecutor`` (the Executor port on the ledger) and the routing, on both stores.

The pool runs in this process here (``Pool.run`` as a task on its own store connection), so
these tests are quick; tests/runtime/test_pool_processes.py kills real executor processes.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _pool_scenario import QUEUE, agent, charge, index_doc

import stead
from _wait import until_async
from stead.core.effects import Assignment, AssignmentKey, Cancelled, ToolBody, ToolSucceeded
from stead.errors import ExecutorError
from stead.runtime import Pool, StoreExecutor
from stead.runtime.executors import outcome_to_json
from stead.store import open_store
from stead.store.ledger._ledger import Ledger, ledger_for
from stead.testing import PostgresServer, ScriptedModel, SideEffects


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STEAD_TEST_EFFECTS", str(tmp_path / "effects.db"))
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
async def store(url: str) -> AsyncIterator[Any]:
    s = open_store(url)
    yield s
    await s.close()


@pytest.fixture
async def ledger(store: Any) -> AsyncIterator[Ledger]:
    led = ledger_for(store, poll_interval=0.05)
    yield led
    await led.close()


@stead.tool(effect="read_only", queue=QUEUE)
async def hang(ctx: stead.ToolContext) -> str:
    """Wait until told to stop."""
    reason = await ctx.signal.wait()
    raise stead.Aborted(reason)


class pool_running:
    """A ``Pool`` serving ``QUEUE`` as a task of this loop, on its own store connection."""

    def __init__(self, url: str, agents: list[stead.Agent], ttl: float = 1.0) -> None:
        self.pool = Pool(url, agents, queues=[QUEUE], lease_ttl=ttl, poll_interval=0.02)

    async def __aenter__(self) -> Pool:
        self.task = asyncio.ensure_future(self.pool.run())
        await until_async(
            lambda: self.pool.ledger.serves(QUEUE, now=time.time()), "the pool serving", timeout=15
        )
        return self.pool

    async def __aexit__(self, *exc: object) -> None:
        self.pool.stop()
        self.pool.stop()
        await self.task
        await self.pool.close()


def assignment(
    effect_id: str, tool: str = "index_doc", arguments: str = '{"doc": "d"}'
) -> Assignment:
    return Assignment(
        key=AssignmentKey(session_id="s", run_id="r1", effect_id=effect_id),
        body=ToolBody(
            tool_name=tool,
            definition_digest="",
            arguments=arguments,
            effect_class="read_only",
            replay_policy="rerun",
            tool_call_id="c",
            turn_index=0,
            idempotency_key="k",
            attempt=1,
        ),
    )


async def drive(url: str, a: stead.Agent, run_id: str) -> stead.RunView:
    async with stead.Runtime(url, agents=[a]) as rt:
        await rt.start(a, "go", run_id=run_id)
        return await rt.run(run_id)


async def test_a_queue_no_pool_serves_runs_in_process(url: str, ledger: Ledger) -> None:
    view = await drive(url, agent(), "r-local")
    assert view.status == stead.RunStatus.COMPLETED
    assert await ledger.keys("r-local") == []  # never went near the ledger
    [entry] = SideEffects(os.environ["STEAD_TEST_EFFECTS"]).entries("index_doc")
    assert entry["pid"] == os.getpid()
    assert entry["detail"]["token"] >= 1  # under the drive's lease: its fencing token


async def test_a_served_queue_goes_through_the_ledger(url: str, ledger: Ledger) -> None:
    """The run's tool call is accepted, claimed, started and settled in the ledger, and
    acknowledged once the run recorded it (when it asked for its next effect)."""
    async with pool_running(url, [agent()]) as pool:
        view = await drive(url, agent(), "r-pool")
    assert view.status == stead.RunStatus.COMPLETED
    assert pool.performed == 1
    [key] = await ledger.keys("r-pool")
    kinds = [e.kind for e in await ledger.history(key)]
    assert kinds == ["accepted", "claimed", "started", "settled", "acknowledged"]


async def test_dispatch_is_idempotent_by_key_and_refused_once_aborted(
    store: Any, ledger: Ledger
) -> None:
    ex = StoreExecutor(store, ledger=ledger)
    sig = stead.AbortSignal()
    a = assignment("e1")
    assert await ex.dispatch(a, signal=sig) and await ex.dispatch(a, signal=sig)
    assert await ledger.keys("r1") == ["e1"]
    assert not await ex.abort(a.key)  # accepted first
    b = assignment("e2")
    assert await ex.abort(b.key) and await ex.abort(b.key)
    assert not await ex.dispatch(b, signal=sig)
    assert isinstance(await ex.run(b, signal=sig), Cancelled)
    assert isinstance(await ex.outcome(b.key), Cancelled)
    assert (await ex.attachment(b.key), ex.attach(b.key)) == ("aborted", "aborted")
    missing = assignment("e3").key
    assert (await ex.attachment(missing), ex.attach(missing)) == ("missing", "missing")


async def test_attach_active_orphaned_terminal(store: Any, ledger: Ledger) -> None:
    """Accepted or held under a live lease: active; held by an executor whose lease lapsed:
    orphaned; settled: terminal. The synchronous ``attach`` reads the same."""
    now = [1_000.0]
    ex = StoreExecutor(store, ledger=ledger, clock=lambda: now[0])
    a = assignment("e1")
    await ex.dispatch(a, signal=stead.AbortSignal())
    assert (await ex.attachment(a.key), ex.attach(a.key)) == ("active", "active")
    await ledger.heartbeat("x", [QUEUE], ttl=10, now=now[0])
    [c] = await ledger.claim("x", ["default"], limit=1, now=now[0])
    assert await ledger.start("e1", epoch=c.epoch, now=now[0])
    assert await ex.attachment(a.key) == "active"
    now[0] += 11
    assert (await ex.attachment(a.key), ex.attach(a.key)) == ("orphaned", "orphaned")
    await ledger.settle(
        "e1",
        epoch=c.epoch,
        outcome={"kind": "tool_succeeded", "content": "x"},
        now=now[0],
        executor="x",
    )
    assert (await ex.attachment(a.key), ex.attach(a.key)) == ("terminal", "terminal")
    assert await ex.outcome(a.key) == ToolSucceeded(content="x")


async def test_cancel_fires_the_executors_copy_of_the_signal(
    url: str, store: Any, ledger: Ledger
) -> None:
    a = stead.Agent("h", ScriptedModel(["x"]), tools=[hang])
    async with pool_running(url, [a]):
        ex = StoreExecutor(store, ledger=ledger, queue_of=lambda _: QUEUE)
        job = assignment("e1", tool="hang", arguments="{}")
        waiting = asyncio.ensure_future(ex.run(job, signal=stead.AbortSignal()))

        async def started() -> bool:
            row = await ledger.read("e1", now=time.time())
            return row is not None and row.phase == "started"

        await until_async(started, "the tool started", timeout=15)
        await ex.cancel(job.key, "the run was cancelled")
        outcome = await asyncio.wait_for(waiting, 30)
    assert isinstance(outcome, Cancelled) and "cancel" in outcome.reason
    kinds = [e.kind for e in await ledger.history("e1")]
    assert kinds == ["accepted", "claimed", "started", "cancel_requested", "settled"]


async def test_waiters_on_one_key_share_one_read(url: str, store: Any, ledger: Ledger) -> None:
    ex = StoreExecutor(store, ledger=ledger, queue_of=lambda _: QUEUE)
    job = assignment("e1")
    await ex.dispatch(job, signal=stead.AbortSignal())
    waiters = [asyncio.ensure_future(ex.outcome(job.key)) for _ in range(5)]
    await asyncio.sleep(0.1)
    assert len(ex._reads) == 1  # one read loop for the five
    async with pool_running(url, [agent()]):
        outcomes = await asyncio.wait_for(asyncio.gather(*waiters), 30)
    assert len({o.kind for o in outcomes}) == 1 and outcomes[0].kind == "tool_succeeded"


def test_tool_queue_is_checked() -> None:
    assert charge.queue == QUEUE and index_doc.queue == QUEUE
    with pytest.raises(stead.UserError, match="queue must be"):
        stead.tool(queue="no spaces")
    with pytest.raises(stead.UserError, match="queue must be"):

        @stead.tool(queue=3)  # type: ignore[arg-type]
        def f() -> None:
            """F."""


def test_a_model_queue_is_checked_as_a_tool_queue_is() -> None:
    """One rule for both (tools/_queue.py): a name ``stead executor --queues a,b`` can serve.
    A comma or a space passed the Agent's old check (any text without control characters)
    and named a queue no executor could ever list."""
    model = ScriptedModel(["hi"])
    for bad in ("gpu,cpu", "no spaces", "", "q" * 65):
        with pytest.raises(stead.UserError, match="model_queue: queue must be"):
            stead.Agent("a", model, model_queue=bad)
    assert stead.Agent("a", model, model_queue="gpu-1").model_queue == "gpu-1"


async def test_a_rate_limited_answer_pauses_the_queue_for_every_executor(
    url: str, store: Any, ledger: Ledger
) -> None:
    """The pool settles the call ``rate_limited`` and pauses its queue (a second, as the
    provider named no retry-after): no executor claims from it until the pause ends."""
    from stead.core.effects import ModelBody, ModelFailed
    from stead.core.messages import UserMessage, message_to_json
    from stead.testing import Reply

    model = ScriptedModel([Reply(error="rate_limited")], name="limited")
    a = stead.Agent("rl", model, model_queue=QUEUE)
    request = {
        "model": "limited", "system": "", "messages": [message_to_json(UserMessage(content="hi"))],
        "tools": [], "max_output_tokens": None, "turn_index": 0, "settings": {},
    }  # fmt: skip
    job = Assignment(
        key=AssignmentKey(session_id="s", run_id="r1", effect_id="m1"),
        body=ModelBody(model="limited", request=request, request_digest=""),
    )
    ex = StoreExecutor(store, ledger=ledger, queue_of=lambda _: QUEUE)
    async with pool_running(url, [a]):
        outcome = await asyncio.wait_for(ex.run(job, signal=stead.AbortSignal()), 30)
        assert isinstance(outcome, ModelFailed) and outcome.code == "rate_limited"
    async with ledger._reading() as s:
        row = await s.one(
            ledger._q("SELECT paused_until FROM queue_limits WHERE queue = ?"), (QUEUE,)
        )
    assert row is not None
    until = float(row[0])
    await ex.dispatch(assignment("t1"), signal=stead.AbortSignal())
    await ledger.heartbeat("other", [QUEUE], ttl=100, now=until - 1)
    assert await ledger.claim("other", [QUEUE], limit=1, now=until - 0.01) == []
    assert len(await ledger.claim("other", [QUEUE], limit=1, now=until + 0.01)) == 1


async def test_a_new_owner_sees_a_previous_owners_key_in_the_ledger(
    url: str, store: Any, ledger: Ledger
) -> None:
    """What a takeover asks: the routing executor of a new process has never seen the key,
    and answers from the ledger (orphaned here: its executor's lease lapsed), not "missing"."""
    from stead.runtime.executors._executor import InProcessExecutor
    from stead.runtime.executors._store_executor import routed

    a = agent()
    first = StoreExecutor(store, ledger=ledger, queue_of=lambda _: QUEUE)
    job = assignment("e1")
    await first.dispatch(job, signal=stead.AbortSignal())
    await ledger.heartbeat("x", [QUEUE], ttl=60, now=time.time())
    [c] = await ledger.claim("x", [QUEUE], limit=1, now=time.time())
    await ledger.start("e1", epoch=c.epoch, now=time.time())
    fresh = routed(InProcessExecutor(a.model, a.registry), a.registry, store, {id(store): ledger})
    assert fresh.attach(job.key) == "active"
    # Its lease lapses (ended a second ago), not a short lease slept past: a lease of 0.5 s
    # could lapse on a loaded machine before the "active" read above.
    await ledger.heartbeat("x", [QUEUE], ttl=0, now=time.time() - 1)
    assert fresh.attach(job.key) == "orphaned"
    assert fresh.attach(assignment("never").key) == "missing"


async def _settle_as_an_executor(url: str, effect_id: str, outcome: dict[str, Any]) -> None:
    """Claim the key and settle it with ``outcome``, as an executor of another process."""
    other = open_store(url)
    led = ledger_for(other)
    try:
        await led.heartbeat("ex-far", [QUEUE], ttl=30, now=time.time())
        [claimed] = await led.claim("ex-far", [QUEUE], limit=1, now=time.time(), start=True)
        assert claimed.effect_id == effect_id
        assert await led.settle(
            effect_id, epoch=claimed.epoch, outcome=outcome, now=time.time(), executor="ex-far"
        )
    finally:
        await led.close()
        await other.close()


async def test_an_outcome_read_the_server_cannot_answer_is_retried(
    crashable_postgres: PostgresServer, crashable_pg_url: str
) -> None:
    """The server dies before the waiter's first read: the read fails on the transport, and
    is tried again (the waiter's own, not only the poll's) until the server is back and the
    key settles; the outcome is the one the ledger holds."""
    server, url = crashable_postgres, crashable_pg_url
    store = open_store(url)
    ex = StoreExecutor(store, queue_of=lambda a: QUEUE, wait_round=0.5)
    try:
        a = assignment("e-retried")
        assert await ex.dispatch(a, signal=stead.AbortSignal())
        await asyncio.to_thread(server.kill)
        waiting = asyncio.ensure_future(ex.outcome(a.key))
        await asyncio.sleep(1.0)  # reads fail on the dead server meanwhile
        assert not waiting.done()
        await asyncio.to_thread(server.start)
        await _settle_as_an_executor(url, "e-retried", outcome_to_json(ToolSucceeded(content="ok")))
        assert await asyncio.wait_for(waiting, 60) == ToolSucceeded(content="ok")
    finally:
        await ex.close()
        await store.close()


async def test_an_outcome_the_ledger_holds_that_cannot_be_read_fails_after_one_read(
    url: str, store: Any
) -> None:
    """A settled outcome that is not an outcome (from outside: the store's row) fails the
    wait with an error naming the key, after one read: every read would meet it, and no
    outcome is made up."""
    ex = StoreExecutor(store, queue_of=lambda a: QUEUE, wait_round=0.5)
    try:
        a = assignment("e-garbled")
        assert await ex.dispatch(a, signal=stead.AbortSignal())
        await _settle_as_an_executor(url, "e-garbled", {"kind": "tool_succeeded", "size": 3})
        with pytest.raises(
            ExecutorError, match=r"'ex-far' settled effect e-garbled .* cannot be read"
        ):
            await asyncio.wait_for(ex.outcome(a.key), 10)
    finally:
        await ex.close()
