"""An executor behind HTTP holds each key under its owner's lease: its tools see the run's
fencing token, and the key's deadline passes when the owner falls silent.

The far side is ``executor_app`` on a real uvicorn server on 127.0.0.1; the owner (a
``Runtime`` on SQLite) reaches it through a relay process (``_relay`` of the runtime tests)
that the test freezes with SIGSTOP: the owner's outcome polls, which vouch for its lease,
stop arriving, as when the owner is paused or cut off. The far tool then sees its lease
lost, at its deadline, while the owner still holds the run; once the relay wakes, the run
records what the tool returned.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn

import stead
from _wait import until_async
from stead._lease import LAPSED
from stead.core.effects import (
    REPLAY_POLICY,
    Assignment,
    AssignmentKey,
    ToolBody,
    assignment_to_json,
)
from stead.runtime import InProcessExecutor
from stead.server._executor_http import LEASE_HEADER, HttpExecutor, executor_app
from stead.server._serve import _Server
from stead.testing import Reply, ScriptedModel

sys.path.insert(0, str(Path(__file__).parents[1] / "runtime"))
from _relay import Relay  # the runtime tests' relay process

pytestmark = pytest.mark.timeout(120)

SECRET = "executor-lease-secret-for-the-tests"


class Seen:
    """What the far tool saw: its fencing token, and when and why its lease was lost."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.tokens: list[int] = []
        self.lost: list[tuple[float, str, bool]] = []


def far_agent() -> stead.Agent:
    @stead.tool(effect="non_idempotent")
    async def hold_far(ctx: stead.ToolContext[Seen]) -> str:
        """Work far away until the key's lease is lost."""
        ctx.deps.tokens.append(ctx.fencing_token)
        ctx.deps.started.set()
        reason = await ctx.lease_lost()
        ctx.deps.lost.append((time.time(), reason, ctx.aborted))
        return "stood down"

    model = ScriptedModel([Reply(tool_calls=[("hold_far", {})]), "Done."])
    return stead.Agent("far", model, [hold_far], deps_type=Seen)


@pytest.fixture
async def far() -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()
    agent = far_agent()
    app = executor_app(InProcessExecutor(agent.model, agent.registry, deps=seen), {SECRET: "owner"})
    server = _Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    task = asyncio.ensure_future(server.serve())
    await until_async(lambda: server.started, "the server started", timeout=10)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        server.should_exit = True
        await task


async def test_a_far_key_holds_the_owners_token_and_lapses_when_the_owner_falls_silent(
    far: tuple[str, Seen], tmp_path: Path
) -> None:
    url, seen = far
    owner_side = far_agent()
    made: list[HttpExecutor] = []
    relay = Relay(url)

    def factory(agent: stead.Agent, sink: object) -> HttpExecutor:
        made.append(HttpExecutor(relay.url, SECRET, poll=0.01))
        return made[-1]

    try:
        async with stead.Runtime(
            f"sqlite:///{tmp_path / 'runs.db'}", agents=[owner_side], lease_ttl=2,
            executor_factory=factory, deps=Seen(),
        ) as rt:  # fmt: skip
            run_id = await rt.start(owner_side, "hold on far away")
            drive = asyncio.ensure_future(rt.run(run_id))
            await asyncio.wait_for(seen.started.wait(), 60)
            record = await rt.store.get_run(run_id)
            assert seen.tokens == [record.epoch] and record.epoch >= 1

            # The owner's polls vouch for its lease: past several of its TTLs, still held.
            await asyncio.sleep(2.0)  # real time: the far deadline is on the real clock
            assert seen.lost == []

            relay.signal(signal.SIGSTOP)  # the owner falls silent for the far side
            await until_async(lambda: seen.lost, "the lease lost", timeout=30)
            [(_, reason, aborted)] = seen.lost
            assert reason == LAPSED and aborted
            # The owner never lost the run: only the far key's deadline passed.
            held = await rt.store.get_run(run_id)
            assert held.lease_owner == rt.owner and held.epoch == record.epoch
            relay.signal(signal.SIGCONT)
            view = await asyncio.wait_for(drive, 60)
            results = [
                e.event.content  # type: ignore[attr-defined]
                for e in await rt.events(run_id)
                if e.event.kind == "tool_result_recorded"
            ]
        assert view.status is stead.RunStatus.COMPLETED
        assert results == ["stood down"]  # what the far tool returned, recorded once
    finally:
        relay.stop()
        for ex in made:
            await ex.close()


async def test_a_stale_owners_word_moves_the_far_deadline_on_not_at_all(
    far: tuple[str, Seen],
) -> None:
    """The key is dispatched under token 5 with half a second left; a poll that carries
    token 4 (an owner the run has since moved on from) and a minute is not believed: the
    key's lease lapses at the first owner's deadline."""
    url, seen = far
    [tool] = [t for t in far_agent().registry if t.name == "hold_far"]
    assignment = Assignment(
        key=AssignmentKey(session_id="s", run_id="r", effect_id="e1"),
        body=ToolBody(
            tool_name="hold_far",
            definition_digest=tool.definition_digest,
            arguments="{}",
            effect_class="non_idempotent",
            replay_policy=REPLAY_POLICY["non_idempotent"],
            tool_call_id="c",
            turn_index=0,
            idempotency_key="k",
            attempt=1,
        ),
    )
    auth = {"authorization": f"Bearer {SECRET}"}
    async with httpx.AsyncClient(base_url=url, headers=auth) as client:
        sent = await client.post(
            "/v1/effects", json=assignment_to_json(assignment), headers={LEASE_HEADER: "5 0.5"}
        )
        assert sent.status_code == 202
        await asyncio.wait_for(seen.started.wait(), 30)
        stale = await client.get("/v1/effects/s/r/e1/outcome", headers={LEASE_HEADER: "4 60"})
        assert stale.status_code == 204
        await until_async(lambda: seen.lost, "the lease lost", timeout=30)
        assert seen.tokens == [5]
        [(_, reason, aborted)] = seen.lost
        assert reason == LAPSED and aborted
