"""An executor behind HTTP (``stead.server._executor_http``), on a real uvicorn server on
127.0.0.1: the wire's answers (202, 409, 400, 401, 200, 204, 404, 410), a dispatch whose
answer was lost retried into the same acceptance, and a whole run whose model and tool calls
were all performed on the far side."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

import stead
from _wait import until_async
from stead._signal import AbortSignal
from stead.core.effects import (
    REPLAY_POLICY,
    Assignment,
    AssignmentKey,
    Cancelled,
    ToolBody,
    ToolSucceeded,
    assignment_to_json,
)
from stead.core.events import EffectReconciled
from stead.runtime import InProcessExecutor
from stead.runtime.executors import outcome_from_json
from stead.server._executor_http import (
    HttpExecutor,
    executor_app,
    outcome_to_json,
    serve_executor,
)
from stead.store import Claim
from stead.testing import Reply, ScriptedModel

SECRET = "executor-secret-for-the-tests"
ran: list[str] = []
gate: asyncio.Event | None = None


@stead.tool(effect="read_only")
async def peek(what: str) -> str:
    """Look at something (waits on the gate when one is set)."""
    ran.append(what)
    if gate is not None:
        await gate.wait()
    return f"saw {what}"


def _agent() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("peek", {"what": "far"})]), "seen far away"])
    return stead.Agent("far", model, [peek])


from stead.server._serve import _Server  # noqa: E402 - uvicorn without signal handling


@pytest.fixture
async def far() -> AsyncIterator[tuple[str, stead.Agent]]:
    """A sandbox: the agent's model and tools in an in-process executor, served over HTTP."""
    ran.clear()
    agent = _agent()
    app = executor_app(InProcessExecutor(agent.model, agent.registry), {SECRET: "owner"})
    server = _Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    task = asyncio.ensure_future(server.serve())
    await until_async(lambda: server.started, "the server started", timeout=10)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", agent
    finally:
        server.should_exit = True
        await task


def _assignment(effect: str, what: str = "x") -> Assignment:
    return Assignment(
        key=AssignmentKey(session_id="s", run_id="run_far", effect_id=effect),
        body=ToolBody(
            tool_name="peek",
            definition_digest=peek.definition_digest,
            arguments=f'{{"what":"{what}"}}',
            effect_class="read_only",
            replay_policy=REPLAY_POLICY["read_only"],
            tool_call_id="call_1",
            turn_index=0,
            idempotency_key="k",
            attempt=1,
        ),
    )


async def test_the_wire(far: tuple[str, stead.Agent]) -> None:
    url, _ = far
    ex = HttpExecutor(url, SECRET, poll=0.01)
    try:
        signal = AbortSignal()
        a = _assignment("e1")
        assert await ex.dispatch(a, signal=signal)
        assert await ex.dispatch(a, signal=signal)  # idempotent by key: the same acceptance
        assert await ex.outcome(a.key) == ToolSucceeded(content="saw x")
        assert await ex.outcome(a.key) == ToolSucceeded(content="saw x")  # kept once read
        assert ran == ["x"] and await ex.attach(a.key) == "terminal"
        # aborted before anyone dispatched it: refused (409), its outcome gone (410)
        b = _assignment("e2")
        assert await ex.abort(b.key)
        assert not await ex.dispatch(b, signal=signal)
        assert isinstance(await ex.outcome(b.key), Cancelled)
        assert await ex.attach(b.key) == "aborted"
        assert not await ex.abort(a.key)  # accepted first: the abort loses
        with pytest.raises(KeyError):
            await ex.outcome(_assignment("never").key)  # 404
    finally:
        await ex.close()
    async with httpx.AsyncClient(base_url=url) as raw:
        wrong = assignment_to_json(_assignment("e3"))
        wrong["kind"] = "model"  # the discriminator and the body disagree
        auth = {"authorization": f"Bearer {SECRET}"}
        assert (await raw.post("/v1/effects", json=wrong, headers=auth)).status_code == 400
        ok = assignment_to_json(_assignment("e3"))
        assert (await raw.post("/v1/effects", json=ok)).status_code == 401
        bad = {"authorization": "Bearer nope"}
        assert (await raw.post("/v1/effects", json=ok, headers=bad)).status_code == 401
        assert ran == ["x"]


async def test_not_settled_yet_is_204(far: tuple[str, stead.Agent]) -> None:
    global gate
    url, _ = far
    gate = asyncio.Event()
    try:
        async with httpx.AsyncClient(
            base_url=url, headers={"authorization": f"Bearer {SECRET}"}
        ) as raw:
            a = _assignment("slow")
            assert (await raw.post("/v1/effects", json=assignment_to_json(a))).status_code == 202
            assert (await raw.get("/v1/effects/s/run_far/slow/outcome")).status_code == 204
            gate.set()

            async def settled() -> httpx.Response | None:
                r = await raw.get("/v1/effects/s/run_far/slow/outcome")
                return r if r.status_code == 200 else None

            r = await until_async(settled, "the outcome", timeout=2, every=0.01)
            assert outcome_from_json(r.json()) == ToolSucceeded(content="saw x")
    finally:
        gate = None


class _LosesFirstAnswer(httpx.AsyncHTTPTransport):
    """A real transport whose first answer is lost after the server got the request."""

    lost = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if not self.lost:
            self.lost += 1
            await response.aclose()
            raise httpx.ReadError("the connection dropped before the answer", request=request)
        return response


async def test_a_lost_dispatch_answer_is_retried_into_the_same_acceptance(
    far: tuple[str, stead.Agent],
) -> None:
    url, _ = far
    transport = _LosesFirstAnswer()
    client = httpx.AsyncClient(
        base_url=url, transport=transport, headers={"authorization": f"Bearer {SECRET}"}
    )
    ex = HttpExecutor(url, SECRET, poll=0.01, client=client)
    try:
        a = _assignment("lost")
        assert await ex.dispatch(a, signal=AbortSignal())
        assert transport.lost == 1
        assert await ex.outcome(a.key) == ToolSucceeded(content="saw x")
        assert ran == ["x"]  # the far side accepted it once and ran it once
    finally:
        await ex.close()


async def test_a_run_whose_effects_all_ran_far_away(
    far: tuple[str, stead.Agent], tmp_path: Path
) -> None:
    url, _ = far
    owner_side = stead.Agent("far", ScriptedModel([]), [peek])  # never called here
    made: list[HttpExecutor] = []

    def factory(agent: stead.Agent, sink: Any) -> Any:
        made.append(HttpExecutor(url, SECRET, poll=0.01))
        return made[-1]

    async with stead.Runtime(
        str(tmp_path / "runs.db"), agents=[owner_side], executor_factory=factory
    ) as rt:
        view = await rt.run(await rt.start(owner_side, "look far away"))
    for ex in made:
        await ex.close()
    assert view.status is stead.RunStatus.COMPLETED and view.output == "seen far away"
    assert ran == ["far"]


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "nope"},
        {"kind": "tool_failed"},
        {"kind": "model_succeeded", "message": {"role": "user", "content": "x"}},
        [],
    ],
)
def test_a_malformed_outcome_is_refused(data: Any) -> None:
    with pytest.raises(ValueError):
        outcome_from_json(data)


def test_outcomes_round_trip() -> None:
    for o in (ToolSucceeded(content="a"), Cancelled(reason="r")):
        assert outcome_from_json(outcome_to_json(o)) == o


class _Full(InProcessExecutor):
    """An executor that cannot take work now."""

    async def dispatch(self, assignment: Any, *, signal: AbortSignal, local: object = None) -> bool:
        raise RuntimeError("no capacity")


async def test_an_executor_that_cannot_take_it_is_503_and_retried() -> None:
    agent = _agent()
    app = executor_app(_Full(agent.model, agent.registry), {SECRET: "owner"})
    transport = httpx.ASGITransport(app=app)
    auth = {"authorization": f"Bearer {SECRET}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://far", headers=auth) as c:
        r = await c.post("/v1/effects", json=assignment_to_json(_assignment("busy")))
        assert r.status_code == 503 and "no capacity" in r.json()["error"]
        ex = HttpExecutor("http://far", SECRET, poll=0.001, retries=2, client=c)
        with pytest.raises(ConnectionError, match="503"):
            await ex.dispatch(_assignment("busy"), signal=AbortSignal())


async def test_a_tool_far_away_outlives_its_owner_and_the_new_owner_keeps_it(
    far: tuple[str, stead.Agent], tmp_path: Path
) -> None:
    """The owner dies while the sandbox runs its tool; the new owner's reconciler finds the
    key active there, keeps it, and records its outcome once it settles: the tool ran once,
    nothing was disposed."""
    global gate
    url, _ = far
    gate = asyncio.Event()
    owner_side = _agent()
    store = str(tmp_path / "runs.db")
    made: list[HttpExecutor] = []

    def factory(agent: stead.Agent, sink: Any) -> Any:
        made.append(HttpExecutor(url, SECRET, poll=0.01))
        return made[-1]

    try:
        async with stead.Runtime(store, agents=[owner_side], executor_factory=factory) as rt:
            rid = await rt.start(owner_side, "look far away")
            first = asyncio.ensure_future(rt.run(rid))
            await until_async(lambda: ran, "the tool ran", timeout=5)
            assert ran == ["far"]
            first.cancel()  # the owner is gone; the sandbox goes on
            with pytest.raises(asyncio.CancelledError):
                await first
        async with stead.Runtime(store, agents=[owner_side], executor_factory=factory) as rt:
            epoch = await rt.store.claim(rid, owner=rt.owner, now=time.time(), ttl=30)
            claim = Claim(
                run_id=rid, agent="far", status="awaiting_tool", epoch=epoch, previous_owner="x"
            )
            second = asyncio.ensure_future(rt.run(rid, claim=claim))

            async def reconciled() -> bool:
                return any(
                    isinstance(s.event, EffectReconciled) for s in await rt.store.read_events(rid)
                )

            # The verdict is in before the tool may finish.
            await until_async(reconciled, "the verdict", timeout=10, every=0.01)
            gate.set()
            view = await second
            events = [s.event for s in await rt.store.read_events(rid)]
    finally:
        gate = None
        for ex in made:
            await ex.close()
    assert view.status is stead.RunStatus.COMPLETED and view.output == "seen far away"
    verdicts = [(e.verdict, e.observed) for e in events if isinstance(e, EffectReconciled)]
    assert verdicts == [("keep", "active")]
    assert ran == ["far"]


async def test_serve_executor_serves_one_agent_and_wants_a_token() -> None:
    with pytest.raises(stead.UserError, match="needs a token"):
        await serve_executor([_agent()], tokens={})
    other = stead.Agent("other", ScriptedModel([]), [peek])
    with pytest.raises(stead.UserError, match="one agent"):
        await serve_executor([_agent(), other], tokens={SECRET: "owner"})
    ports: list[int] = []
    stop = asyncio.Event()
    serving = asyncio.ensure_future(
        serve_executor([_agent()], tokens={SECRET: "owner"}, port=0, ready=ports.append, stop=stop)
    )
    try:
        await until_async(lambda: ports, "the server's port", timeout=10)
        ex = HttpExecutor(f"http://127.0.0.1:{ports[0]}", SECRET, poll=0.01)
        try:
            a = _assignment("served")
            assert await ex.run(a, signal=AbortSignal()) == ToolSucceeded(content="saw x")
        finally:
            await ex.close()
    finally:
        stop.set()
        await serving
