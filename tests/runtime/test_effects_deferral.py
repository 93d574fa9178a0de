"""The ``effects`` mode holds a step nothing outside the log depends on in memory and writes it
with the next commit that must be durable (``OwnedRun``'s held events).

Real SQLite stores, real Runtimes, a second Runtime on the same file for the other writer.
Each test watches what the log says while steps are held (a tool of the run reads it), what
another writer's append does to them (a cancel, a takeover), and when they are written (the
drive stopping, an effect handed to an executor that may leave the process, the bound on
how many are held). What a SIGKILL loses of them is ``test_crash.py``'s, in both modes.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

import pytest

import stead
from stead.core.effects import Assignment, Outcome
from stead.core.events import RunStarted
from stead.runtime import OwnedRun
from stead.runtime.executors._executor import Executor
from stead.runtime.loop._owned import HOLD_EVENTS
from stead.testing import Reply, ScriptedModel, SQLiteCommits, assert_valid_history

pytestmark = pytest.mark.timeout(60)

TURNS = 4
FROZEN = 1000.0
"""The owner's clock: frozen, so the age bound on held events never writes them early."""


def script(turns: int = TURNS) -> ScriptedModel:
    return ScriptedModel(
        [Reply(tool_calls=[("lookup", {"n": i})]) for i in range(turns)] + ["Done."]
    )


def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Either backend: the held append meets the other writer in each store's own check."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return url(tmp_path)


async def _valid(rt: stead.Runtime, rid: str) -> list[str]:
    """The run's log folds and checks (``verify``); its kinds."""
    await OwnedRun.verify(rt.store, rid)
    state, _ = await OwnedRun.load_state(rt.store, rid)
    assert_valid_history(state)
    return [e.event.kind for e in await rt.events(rid)]


@pytest.mark.parametrize("durability", ["strict", "effects"])
async def test_readers_see_held_steps_only_after_the_next_durable_point(
    tmp_path: Path, durability: str
) -> None:
    seen: list[int] = []
    rt: stead.Runtime

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int, ctx: stead.ToolContext) -> str:
        """Look n up; note how long the run's log is meanwhile."""
        seen.append(len(await rt.events(ctx.run_id)))
        return f"found {n}"

    agent = stead.Agent("reader", script(), [lookup], durability=durability)  # type: ignore[arg-type]
    async with stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as rt:
        rid = await rt.start(agent, "Look them up.")
        view = await rt.run(rid)
        assert view.status is stead.RunStatus.COMPLETED
        kinds = await _valid(rt, rid)
    if durability == "effects":
        # Every step held: the log says only run_created until run_completed writes them all.
        assert seen == [1] * TURNS
    else:
        assert seen == sorted(set(seen)) and seen[0] > 1  # every step on disk before the next
    assert kinds.count("tool_result_recorded") == TURNS and kinds[-1] == "run_completed"


async def test_a_cancel_written_while_steps_are_held_is_heard_and_kept(tmp_path: Path) -> None:
    """Another Runtime's cancel lands right after the durable log (run_created), under the
    owner's held steps: the keeper hears it (it compares the row with what is durable, not
    with what the owner holds), the owner's write of its held steps conflicts, they are
    dropped, and the run ends cancelled on a log that folds."""
    aborted: list[bool] = []
    other: stead.Runtime

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int, ctx: stead.ToolContext) -> str:
        """Look n up; at the second, have another process cancel the run."""
        if n == 1:
            await other.cancel(ctx.run_id, "stop", by="test")
            for _ in range(200):
                if ctx.signal.aborted:
                    break
                await asyncio.sleep(0.025)
            aborted.append(ctx.signal.aborted)
        return f"found {n}"

    agent = stead.Agent("cancelled", script(), [lookup], durability="effects")
    async with (
        stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as owner,
        stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as other,
    ):
        owner.watch_interval = 0.05
        rid = await owner.start(agent, "Look them up.")
        view = await owner.run(rid)
        assert aborted == [True]  # heard by the keeper while the tool ran
        assert view.status is stead.RunStatus.CANCELLED
        kinds = await _valid(owner, rid)
    # Nothing of the owner's held steps came before the other process's request.
    assert kinds[:2] == ["run_created", "run_cancel_requested"]
    assert kinds[-1] == "run_cancelled"


async def test_a_takeover_while_steps_are_held_fences_them_out(store_url: str) -> None:
    """The owner's lease lapsed and another worker took the run over: the owner's held steps
    are refused (fenced) and dropped, nothing of them reaches the log, and the new owner
    drives the run from the durable log to the end."""
    new: stead.Runtime
    looked: list[int] = []

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int, ctx: stead.ToolContext) -> str:
        """Look n up; at the second in the first owner, the lease is taken over."""
        looked.append(n)
        if n == 1 and len(looked) == 2:
            await new.store.claim(ctx.run_id, owner=new.owner, now=time.time(), ttl=30.0)
        return f"found {n}"

    agent = stead.Agent("taken", script(), [lookup], durability="effects")
    async with (
        stead.Runtime(store_url, agents=[agent], clock=lambda: FROZEN) as old,
        stead.Runtime(store_url, agents=[agent]) as new,
    ):
        rid = await old.start(agent, "Look them up.")
        with pytest.raises(stead.Fenced):
            await old.run(rid)
        assert [e.event.kind for e in await old.events(rid)] == ["run_created"]
        view = await new.run(rid)
        assert view.status is stead.RunStatus.COMPLETED
        await _valid(new, rid)
        events = [e.event for e in await new.events(rid)]
        owners = {e.owner for e in events if isinstance(e, RunStarted)}
    assert owners == {new.owner}
    # The old owner went on to its end (read_only work, nothing written), then was refused;
    # the new one did all of it again.
    assert looked == [*range(TURNS), *range(TURNS)]


async def test_a_drive_that_stops_writes_what_it_held(tmp_path: Path) -> None:
    """The drive is cancelled (the process shutting down): what it held is written before
    the lease goes, and the next drive does none of it again."""
    looked: list[int] = []
    entered = asyncio.Event()

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int) -> str:
        """Look n up; the third time in the first drive, hang until cancelled."""
        looked.append(n)
        if n == 2 and looked.count(2) == 1:
            entered.set()
            await asyncio.Event().wait()
        return f"found {n}"

    agent = stead.Agent("stopped", script(), [lookup], durability="effects")
    async with stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as rt:
        rid = await rt.start(agent, "Look them up.")
        driving = asyncio.ensure_future(rt.run(rid))
        await entered.wait()
        assert [e.event.kind for e in await rt.events(rid)] == ["run_created"]
        driving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await driving
        kinds = await _valid(rt, rid)
        assert kinds.count("tool_result_recorded") == 2  # turns 0 and 1, written at the stop
        assert (await rt.run(rid)).status is stead.RunStatus.COMPLETED
    assert looked == [0, 1, 2, 2, 3]


class Handing:
    """An executor that is not the in-process one (as a pool's is): it reads the run's log
    before every effect, then performs it in process (everything else is the inner one's)."""

    def __init__(self, inner: Executor, store: Any, logged: list[int]) -> None:
        self.inner, self.store, self.logged = inner, store, logged

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(
        self, assignment: Assignment, *, signal: stead.AbortSignal, local: object | None = None
    ) -> Outcome:
        self.logged.append((await self.store.get_run(assignment.key.run_id)).last_seq)
        return await self.inner.run(assignment, signal=signal, local=local)


async def test_an_effect_that_may_leave_the_process_follows_the_written_log(
    tmp_path: Path,
) -> None:
    """Before an effect goes to an executor that is not the in-process one (a pool, another
    process over HTTP), the held steps are written: its work never rests on steps this
    process could still lose."""
    logged: list[int] = []

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int) -> str:
        """Look n up."""
        return f"found {n}"

    agent = stead.Agent("handed", script(), [lookup], durability="effects")
    async with stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as probe:
        local = probe._executor_factory(agent, None)  # the in-process executor it builds
    async with stead.Runtime(
        url(tmp_path),
        agents=[agent],
        clock=lambda: FROZEN,
        executor_factory=lambda a, sink: cast(Executor, Handing(local, rt.store, logged)),
    ) as rt:
        rid = await rt.start(agent, "Look them up.")
        assert (await rt.run(rid)).status is stead.RunStatus.COMPLETED
        await _valid(rt, rid)
        state, _ = await OwnedRun.load_state(rt.store, rid)
    # Each effect saw every step before it in the log: model, tool, model, ... (2 per turn).
    assert len(logged) == 2 * TURNS + 1
    assert logged == sorted(logged) and len(set(logged)) == len(logged) and logged[0] > 1
    assert state.seq > logged[-1]


async def test_held_steps_are_bounded(tmp_path: Path) -> None:
    """However long a run goes without a durable point, at most ``HOLD_EVENTS`` events are
    held: more are written (without the fsync), so a crash redoes a bounded amount."""
    turns = HOLD_EVENTS // 4 + 4

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int) -> str:
        """Look n up."""
        return f"found {n}"

    agent = stead.Agent("long", script(turns), [lookup], durability="effects")
    async with stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as rt:
        rid = await rt.start(agent, "Look them up.")
        commits = SQLiteCommits(rt.store)
        assert (await rt.run(rid)).status is stead.RunStatus.COMPLETED
        events = len(await _valid(rt, rid))
    assert events > HOLD_EVENTS
    # The claim and the release, one unsynced write of the held events, the synced end.
    assert (commits.commits, commits.fsyncs) == (4, 1)


async def test_an_approval_answered_while_a_sibling_runs_is_kept(tmp_path: Path) -> None:
    """A person can answer only while the run waits on one, and every commit of a run in that
    state is durable: nothing is held for the decision to land under. Another Runtime approves
    one call while its sibling (read_only) runs; the owner's result then meets the decision,
    reads it, and the run goes on with it."""
    other: stead.Runtime
    charged: list[int] = []

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int, ctx: stead.ToolContext) -> str:
        """Look n up; meanwhile, the person approves the charge."""
        view = await other.approve(ctx.run_id, "call_0_1")
        assert view.status is stead.RunStatus.AWAITING_APPROVAL  # the lookup is still open
        return f"found {n}"

    @stead.tool(effect="non_idempotent", name="charge", requires_approval=True)
    async def charge(cents: int) -> str:
        """Charge the card."""
        charged.append(cents)
        return "charged"

    model = ScriptedModel(
        [Reply(tool_calls=[("lookup", {"n": 1}), ("charge", {"cents": 500})]), "Charged."]
    )
    agent = stead.Agent("approved", model, [lookup, charge], durability="effects")
    async with (
        stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as owner,
        stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as other,
    ):
        rid = await owner.start(agent, "Charge it.")
        view = await owner.run(rid)
        if view.status is stead.RunStatus.AWAITING_APPROVAL:  # rested before it heard
            view = await owner.run(rid)
        assert view.status is stead.RunStatus.COMPLETED
        kinds = await _valid(owner, rid)
    assert charged == [500]
    assert kinds.count("approval_decided") == 1


async def test_a_durable_write_that_meets_another_writer_starts_the_step_over(
    store_url: str,
) -> None:
    """The keeper has not looked yet when the owner's next durable commit (the intent of an
    idempotent_write) meets the cancel another Runtime wrote under its held steps: the
    commit is refused, the held steps dropped, and the drive starts over from the log, which
    says to cancel. The tool whose intent was refused never runs."""
    other: stead.Runtime
    written: list[int] = []

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int, ctx: stead.ToolContext) -> str:
        """Look n up; at the second, have another process cancel the run."""
        if n == 1:
            await other.cancel(ctx.run_id, "stop")
        return f"found {n}"

    @stead.tool(effect="idempotent_write", name="note")
    async def note(n: int) -> str:
        """Write a note."""
        written.append(n)
        return "noted"

    turns: list[Reply | str] = [Reply(tool_calls=[("lookup", {"n": i})]) for i in range(2)]
    model = ScriptedModel([*turns, Reply(tool_calls=[("note", {"n": 2})]), "Done."])
    agent = stead.Agent("met", model, [lookup, note], durability="effects")
    async with (
        stead.Runtime(store_url, agents=[agent], clock=lambda: FROZEN) as owner,
        stead.Runtime(store_url, agents=[agent], clock=lambda: FROZEN) as other,
    ):
        owner.watch_interval = 60.0  # the keeper does not look before the intent is written
        rid = await owner.start(agent, "Look them up, then note it.")
        view = await owner.run(rid)
        assert view.status is stead.RunStatus.CANCELLED
        kinds = await _valid(owner, rid)
    assert kinds[:2] == ["run_created", "run_cancel_requested"]
    assert written == []


async def test_a_deadline_that_meets_another_writer_looks_again_from_the_log(
    tmp_path: Path,
) -> None:
    """The run's deadline passes while steps are held and another Runtime has cancelled the
    run under them: the timeout's commit is refused, the held steps dropped, and the drive
    looks again from the log (which says to cancel) instead of raising."""
    now = [FROZEN]
    other: stead.Runtime

    results: list[str | None] = []

    @stead.tool(effect="read_only", name="lookup")
    async def lookup(n: int, ctx: stead.ToolContext) -> str:
        """Look n up; at the second, have another process cancel the run."""
        if n == 1:
            await other.cancel(ctx.run_id, "stop")
        return f"found {n}"

    def crash(point: str, tool: str | None) -> None:
        """The crash-point seam: once the second result is held, the deadline passes."""
        if point == "after_result_commit":
            results.append(tool)
            if len(results) == 2:
                now[0] += 3600.0

    limits = stead.Limits(max_duration=60.0)
    agent = stead.Agent("late", script(), [lookup], durability="effects", limits=limits)
    async with (
        stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: now[0], crash=crash) as owner,
        stead.Runtime(url(tmp_path), agents=[agent], clock=lambda: FROZEN) as other,
    ):
        owner.watch_interval = 60.0
        rid = await owner.start(agent, "Look them up.")
        view = await owner.run(rid)
        assert view.status is stead.RunStatus.CANCELLED
        kinds = await _valid(owner, rid)
    assert kinds[:2] == ["run_created", "run_cancel_requested"]
