"""What a run costs that it need not: work done once per agent, or once per call, instead of
once per run or twice per call. Counted, never timed."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import stead
from stead.core.builders import cancel_request_event
from stead.core.messages import ToolSchema
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.runtime.loop._owned import OwnedRun
from stead.store import Store, open_store
from stead.testing import Reply, ScriptedModel


@stead.tool(effect="read_only")
def look(what: str) -> str:
    """Look at something."""
    return f"saw {what}"


async def test_the_runs_of_an_agent_share_its_tool_schemas(tmp_path: Path) -> None:
    """The schemas a model request carries (a deep copy of each tool's JSON schema) and the
    specs the core decides with are worked out at the agent's first run, not at every run."""
    sent: list[tuple[ToolSchema, ...]] = []

    def call(request: ModelRequest) -> Reply:
        sent.append(request.tools)
        return Reply(tool_calls=[("look", {"what": "x"})])

    def answer(request: ModelRequest) -> str:
        sent.append(request.tools)
        return "done"

    agent = stead.Agent("shared", ScriptedModel([call, answer, call, answer]), [look])
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent]) as rt:
        for _ in range(2):
            view = await rt.run(await rt.start(agent, "go"))
            assert view.status is RunStatus.COMPLETED
    assert [t.name for t in sent[0]] == ["look"]
    assert all(tools is sent[0] for tools in sent)  # one tuple: no copy per run


class _Counted:
    """The real store, with its ``load`` calls counted; ``before_claim`` runs just before
    each claim (another process's write between the row's read and the claim)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loads = 0
        self.before_claim: Callable[[str], Awaitable[None]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def load(self, run_id: str) -> Any:
        self.loads += 1
        return await self.store.load(run_id)

    async def claim(self, run_id: str, **kw: Any) -> int:
        if self.before_claim is not None:
            await self.before_claim(run_id)
        return await self.store.claim(run_id, **kw)


def _agent(name: str) -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("look", {"what": "x"})]), "done"])
    return stead.Agent(name, model, [look])


async def _request_cancel(store: Store, run_id: str) -> None:
    """A cancel request written without the lease (a steering append), as another process
    records one for a run it sees an owner of."""
    session = await OwnedRun.steering(store, run_id, clock=time.time)
    await session.append([cancel_request_event("stop", "test")])


async def test_a_run_started_here_is_driven_without_reading_it_back(tmp_path: Path) -> None:
    """``start`` then ``run`` in one Runtime: the drive starts from the ``run_created`` it
    wrote, not from a load of it; the log and the view are what they always were."""
    counted = _Counted(open_store(tmp_path / "runs.db"))
    agent = _agent("fresh")
    async with stead.Runtime(counted, agents=[agent]) as rt:  # type: ignore[arg-type]
        rid = await rt.start(agent, "go")
        view = await rt.run(rid)
        assert counted.loads == 0
        assert view.status is RunStatus.COMPLETED and view.output == "done"
        kinds = [e.event.kind for e in await rt.events(rid)]
        assert kinds[:4] == ["run_created", "agent_recorded", "run_started", "turn_started"]
        assert await rt.get(rid) == view
        # With a config (the caller's own dict), the log is read as before.
        rid = await rt.start(agent, "go", config={"k": 1})
        assert (await rt.run(rid)).status is RunStatus.COMPLETED
        assert counted.loads == 2  # the drive's load, and get()'s above


async def test_a_run_written_to_since_its_start_is_read_back(tmp_path: Path) -> None:
    """A cancel request recorded between ``start`` and ``run``: the row says the log moved
    on, and the drive reads it (and cancels the run)."""
    counted = _Counted(open_store(tmp_path / "runs.db"))
    agent = _agent("touched")
    async with stead.Runtime(counted, agents=[agent]) as rt:  # type: ignore[arg-type]
        rid = await rt.start(agent, "go")
        await _request_cancel(counted.store, rid)
        view = await rt.run(rid)
        assert view.status is RunStatus.CANCELLED
        assert counted.loads == 1


async def test_a_write_between_the_row_and_the_claim_is_met_before_any_effect(
    tmp_path: Path,
) -> None:
    """The cancel request lands after the drive read the row and before it claimed: the drive
    starts from the state it created, its first append (no effect before it) meets the
    request's, reads the log again and cancels the run; no model call is made."""
    counted = _Counted(open_store(tmp_path / "runs.db"))
    calls: list[str] = []

    def reply(_: ModelRequest) -> str:
        calls.append("model")
        return "done"

    agent = stead.Agent("raced", ScriptedModel([reply]), [])
    async with stead.Runtime(counted, agents=[agent]) as rt:  # type: ignore[arg-type]
        rid = await rt.start(agent, "go")

        async def write(run_id: str) -> None:
            counted.before_claim = None
            await _request_cancel(counted.store, run_id)

        counted.before_claim = write
        view = await rt.run(rid)
        assert view.status is RunStatus.CANCELLED and calls == []
        kinds = [e.event.kind for e in await rt.events(rid)]
        assert kinds[:2] == ["run_created", "run_cancel_requested"]
