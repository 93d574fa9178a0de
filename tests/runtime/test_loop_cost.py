"""What the run loop spends per step that it need not:
counted, never timed."""

from __future__ import annotations

import asyncio
import gc
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import stead
from stead.core import canonical, effects
from stead.core.effects import Assignment, Outcome
from stead.core.states import RunStatus
from stead.runtime import InProcessExecutor
from stead.runtime.loop._loop import RunLoop
from stead.testing import Reply, ScriptedModel


@stead.tool(effect="read_only")
async def look(what: str) -> str:
    """Look at something."""
    return f"saw {what}"


def _agent(name: str) -> stead.Agent:
    turns: list[Reply | str] = [Reply(tool_calls=[("look", {"what": f"x{i}"})]) for i in range(3)]
    return stead.Agent(name, ScriptedModel([*turns, "done"]), [look])


async def test_a_drive_leaves_no_cycle_for_the_collector(tmp_path: Path) -> None:
    """A run's loop (and its session, state and executor) is freed by reference counting when
    its drive ends. A cycle through it (a method of the loop left as its abort future's
    callback) would leave every run a busy worker drove for the cyclic collector to find."""
    agent = _agent("freed")
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent]) as rt:
        await rt.run(await rt.start(agent, "warm up"))
        gc.collect()
        gc.disable()
        try:
            run_id = await rt.start(agent, "go")
            view = await rt.run(run_id)
            await asyncio.sleep(0)
            # This drive's loop only: a worker process of the suite may hold other tests' live
            # runs (their loops are still referenced, not leaked).
            left = [
                o
                for o in gc.get_objects()
                if isinstance(o, RunLoop) and o.owned.state.run_id == run_id
            ]
        finally:
            gc.enable()
    assert view.status is RunStatus.COMPLETED
    assert left == []


def _counting(codes: dict[Any, str], seen: list[str]) -> Any:
    def hook(frame: FrameType, event: str, _: object) -> None:
        if event == "call" and frame.f_code in codes:
            seen.append(codes[frame.f_code])

    return hook


async def test_the_own_executor_is_handed_no_assignment(tmp_path: Path) -> None:
    """The Runtime's in-process executor performs the loop's model and tool calls as they
    are: no effect id (a sha256 each), no assignment, key or body is made for them (nothing
    would read them). An executor that is not that one still gets every effect assigned."""
    codes = {canonical.effect_id.__code__: "effect_id", effects.tool_assignment.__code__: "tool"}
    seen: list[str] = []
    agent = _agent("direct")
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        sys.setprofile(_counting(codes, seen))
        try:
            view = await rt.run(rid)
        finally:
            sys.setprofile(None)
    assert view.status is RunStatus.COMPLETED
    assert seen == []

    assigned: list[str] = []

    class Wrapped:
        """Another executor: the in-process one behind a wrapper that sees every effect."""

        def __init__(self, inner: InProcessExecutor) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        async def run(self, a: Assignment, *, signal: Any, local: object = None) -> Outcome:
            assigned.append(f"{a.kind} {a.key.effect_id}")
            return await self.inner.run(a, signal=signal, local=local)

    other = _agent("wrapped")

    def factory(a: stead.Agent, sink: Any) -> Any:
        return Wrapped(InProcessExecutor(a.model, a.registry, sink))

    async with stead.Runtime(
        f"sqlite:///{tmp_path / 'other.db'}", agents=[other], executor_factory=factory
    ) as rt:
        view = await rt.run(await rt.start(other, "go"))
    assert view.status is RunStatus.COMPLETED
    assert [a.split()[0] for a in assigned] == ["model", "tool"] * 3 + ["model"]
    assert len({a.split()[1] for a in assigned}) == 7  # an effect id each
