"""Bad replies and failing steps end well, on real SQLite
files: a reply with repeated ids runs with unique ones, a step that raises every time fails
the run after ``max_step_failures`` attempts (across Runtimes and worker claims), reused
call ids get distinct idempotency keys, one Runtime never drives a run twice at once, and a
refused call repeated is caught as a loop."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from _crash_harness import KILLED, Scenario
from _scenario import RUN_ID, side_effects

import stead
from _wait import until_async
from stead._signal import AbortSignal
from stead.core.effects import Assignment, AssignmentKey, ModelBody, Outcome, ToolBody
from stead.core.events import LoopDetected, RunFailed, RunRecovered, StepFailed
from stead.core.messages import AssistantMessage, ToolCall, ToolResultMessage
from stead.core.progress import ProgressSink
from stead.core.states import RunStatus
from stead.errors import LeaseHeld
from stead.providers import ModelRequest
from stead.runtime import Runtime, Worker
from stead.runtime.executors._executor import Attachment, InProcessExecutor
from stead.testing import Reply, ScriptedModel, assert_valid_history


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


added: list[tuple[int, int]] = []
keys: list[str] = []


@stead.tool(effect="read_only")
def add(a: int, b: int) -> int:
    """Add two integers."""
    added.append((a, b))
    return a + b


@stead.tool(effect="idempotent_write")
def put(name: str, ctx: stead.ToolContext) -> str:
    """Store a value under its idempotency key."""
    keys.append(ctx.idempotency_key)
    return f"stored {name}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    added.clear()
    keys.clear()


async def _events(rt: Runtime, rid: str) -> list[object]:
    return [e.event for e in await rt.events(rid)]


# -- a reply the log cannot take as it is ------------------------------------------------------


async def test_a_reply_with_one_call_id_twice_runs_with_unique_ids(store: str) -> None:
    """Two calls with one id made every attempt raise IllegalTransition after paying for
    the model call; the run stayed running for ever."""
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return "4 and 6"

    twice = Reply(
        tool_calls=[
            ToolCall(id="None", name="add", arguments='{"a": 2, "b": 2}'),
            ToolCall(id="None", name="add", arguments='{"a": 3, "b": 3}'),
            ToolCall(id="", name="nosuch", arguments="{}"),
        ]
    )
    model = ScriptedModel([twice, answer])
    agent = stead.Agent("dupes", model, [add])
    async with Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "add")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "4 and 6"
        assert model.calls == 2
        assert sorted(added) == [(2, 2), (3, 3)]
        state = await rt.state(rid)
        assert_valid_history(state)
    # The model reads its calls under the recorded ids, each with its own result.
    (request,) = seen
    reply = next(m for m in request.messages if isinstance(m, AssistantMessage))
    assert [c.id for c in reply.tool_calls] == ["None", "None_t0_1", "call_t0_2"]
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.content, r.is_error) for r in results[:2]] == [
        ("None", "4", False),
        ("None_t0_1", "6", False),
    ]
    assert results[2].tool_call_id == "call_t0_2" and results[2].is_error
    assert "unknown tool" in results[2].content


# -- a step that fails every time --------------------------------------------------------------


class ExplodingExecutor:
    """The in-process executor, but a bug after the effect: the model answers (and is paid
    for), or the tool runs, and then the step raises. Implements the Executor port."""

    def __init__(self, agent: stead.Agent, sink: ProgressSink | None, on: str) -> None:
        self.inner = InProcessExecutor(agent.model, agent.registry, sink)
        self.on = on

    async def dispatch(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> bool:
        return await self.inner.dispatch(assignment, signal=signal, local=local)

    async def outcome(self, key: AssignmentKey) -> Outcome:
        return await self.inner.outcome(key)

    async def run(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> Outcome:
        outcome = await self.inner.run(assignment, signal=signal, local=local)
        kind = "model" if isinstance(assignment.body, ModelBody) else "tool"
        assert isinstance(assignment.body, ModelBody | ToolBody)
        if kind == self.on:
            raise RuntimeError(f"adapter bug after the {kind} call \ud800")
        return outcome

    def attach(self, key: AssignmentKey) -> Attachment:
        return self.inner.attach(key)

    async def abort(self, key: AssignmentKey) -> bool:
        return await self.inner.abort(key)

    async def cancel(self, key: AssignmentKey, reason: str) -> None:
        await self.inner.cancel(key, reason)


def _exploding(on: str):  # type: ignore[no-untyped-def]
    def factory(agent: stead.Agent, sink: ProgressSink | None) -> ExplodingExecutor:
        return ExplodingExecutor(agent, sink, on)

    return factory


async def test_a_step_that_always_raises_fails_the_run_on_the_third_attempt(store: str) -> None:
    """Each attempt is a new Runtime (as a new process would be): the count is in the log."""
    model = ScriptedModel([Reply(tool_calls=[("add", {"a": 1, "b": 1})]), "2"])
    agent = stead.Agent("buggy", model, [add])
    async with Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "add")
    for attempt in (1, 2):
        async with Runtime(store, agents=[agent], executor_factory=_exploding("model")) as rt:
            with pytest.raises(RuntimeError, match="adapter bug"):
                await rt.run(rid)
            assert (await rt.get(rid)).status is RunStatus.RUNNING
            assert (await rt.state(rid)).step_failures == attempt
    async with Runtime(store, agents=[agent], executor_factory=_exploding("model")) as rt:
        view = await rt.run(rid)
        assert view.status is RunStatus.FAILED
        assert view.error is not None and view.error["code"] == "step_failed"
        events = await _events(rt, rid)
        failures = [e for e in events if isinstance(e, StepFailed)]
        assert [f.step for f in failures] == ["call_model (turn 0)"] * 3
        (failed,) = [e for e in events if isinstance(e, RunFailed)]
        assert failed.code == "step_failed" and failed.phase == "runtime"
        assert failed.details is not None
        assert failed.details["error_type"] == "RuntimeError"
        assert failed.details["step"] == "call_model (turn 0)"
        assert failed.details["failures"] == 3
        assert "adapter bug after the model call" in failed.details["message"]
        assert model.calls == 3  # bounded: one paid call per attempt, then no more
        # Resting: another run call does not call the model again.
        assert (await rt.run(rid)).status is RunStatus.FAILED
        assert model.calls == 3
        assert added == []


async def test_a_resume_after_step_failed_gets_fresh_attempts(store: str) -> None:
    model = ScriptedModel([Reply(tool_calls=[("add", {"a": 1, "b": 1})]), "2"])
    agent = stead.Agent("fixed-later", model, [add], limits=stead.Limits(max_step_failures=1))
    async with Runtime(store, agents=[agent], executor_factory=_exploding("tool")) as rt:
        rid = await rt.start(agent, "add")
        assert (await rt.run(rid)).status is RunStatus.FAILED
    async with Runtime(store, agents=[agent]) as rt:  # the bug fixed, a person resumes
        view = await rt.resume(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "2"


async def test_worker_claims_of_a_failing_step_end_in_a_failed_run(store: str) -> None:
    """A worker keeps a run that raised until its lease lapses, then claims it again: each
    claim is a new attempt (with run_recovered), and the third fails the run."""
    model = ScriptedModel([Reply(tool_calls=[("add", {"a": 1, "b": 1})]), "2"])
    agent = stead.Agent("buggy-tool", model, [add])
    async with Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "add")
        worker = Worker(
            store,
            [agent],
            lease_ttl=0.3,
            poll_interval=0.05,
            executor_factory=_exploding("tool"),
        )
        serving = asyncio.ensure_future(worker.run())
        try:

            async def failed() -> bool:
                return (await rt.get(rid)).status is RunStatus.FAILED

            await until_async(failed, "the run to fail", timeout=30)
        finally:
            worker.stop()
            await serving
            await worker.close()
        events = await _events(rt, rid)
        assert len([e for e in events if isinstance(e, StepFailed)]) == 3
        assert len([e for e in events if isinstance(e, RunRecovered)]) >= 2
        view = await rt.get(rid)
        assert view.error is not None and view.error["code"] == "step_failed"
        assert model.calls == 1  # the model step succeeded once; the tool step failed
        assert len(added) == 3  # the handler ran once per attempt, and no more
        assert worker.stats["error"] == 2 and worker.stats["failed"] == 1


async def test_a_stead_worker_neither_loops_on_a_poisoned_reply_nor_on_a_failing_step(
    store: str, scenario: Scenario, tmp_path: Path
) -> None:
    """The issue's report: ``stead worker --lease-ttl 2`` made 10 paid model calls in 20 s
    on a reply with two calls of one id. A real worker process: that run now completes
    with two model calls, and a run whose step always raises fails after three."""
    import _fleet
    from _workers import WorkerProc

    async with Runtime(store, agents=_fleet.agents()) as rt:
        dupes = await rt.start("dupes", "look up orders 1 and 2")
        broken = await rt.start("broken", "hello")
        proc = WorkerProc(store, tmp_path / "worker.log", "--lease-ttl", "0.5", "--poll", "0.05")
        try:

            async def rested() -> bool:
                a, b = await rt.get(dupes), await rt.get(broken)
                return a.status is RunStatus.COMPLETED and b.status is RunStatus.FAILED

            await until_async(rested, "both runs to rest", timeout=30)
        finally:
            proc.stop()
        assert (await rt.get(dupes)).output == "Both shipped."
        assert_valid_history(await rt.state(dupes))
        assert side_effects().keys("model_call").count("turn 0") == 1
        view = await rt.get(broken)
        assert view.error is not None and view.error["code"] == "step_failed"
        assert "AttributeError" in view.error["message"]
        assert side_effects().keys("model_call").count("broken") == 3  # and then no more


# -- call ids reused across turns --------------------------------------------------------------


async def test_call_0_in_every_turn_gets_a_key_per_call(store: str) -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=[ToolCall(id="call_0", name="put", arguments='{"name": "a"}')]),
            Reply(tool_calls=[ToolCall(id="call_0", name="put", arguments='{"name": "b"}')]),
            "stored both",
        ]
    )
    agent = stead.Agent("numbering", model, [put])
    async with Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "store")
        assert (await rt.run(rid)).status is RunStatus.COMPLETED
        assert keys[0] == hashlib.sha256(f"{rid}call_0".encode()).hexdigest()  # the seed's
        assert keys[1] == hashlib.sha256(f"{rid}call_0_t1_0".encode()).hexdigest()
        assert len(set(keys)) == 2
        assert_valid_history(await rt.state(rid))


def test_a_reused_id_keeps_its_key_across_a_crash(scenario: Scenario) -> None:
    """SIGKILL right after the second call's effect (turn 1, id ``call_0`` again): the rerun
    carries that call's own key, not turn 0's."""
    first = scenario.run("start", "reused_ids", crash="after_tool_effect:upsert_ticket#2")
    assert first.returncode == KILLED, first.stderr
    second = scenario.run("run", "reused_ids")
    assert second.returncode == 0, second.stderr
    assert second.out == {"status": "completed", "output": "Two tickets."}
    k0 = hashlib.sha256(f"{RUN_ID}call_0".encode()).hexdigest()
    k1 = hashlib.sha256(f"{RUN_ID}call_0_t1_0".encode()).hexdigest()
    assert side_effects().keys("upsert_ticket") == [k0, k1, k1]


# -- two drivers in one Runtime ----------------------------------------------------------------


async def test_a_second_driver_in_the_same_runtime_is_refused(store: str) -> None:
    entered, gate = asyncio.Event(), asyncio.Event()
    charged: list[str] = []

    def find(cents: int, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
        return stead.Done("charged") if ctx.idempotency_key in charged else stead.NotDone()

    @stead.tool(effect="non_idempotent", reconcile=find)
    async def charge(cents: int, ctx: stead.ToolContext) -> str:
        """Charge a card."""
        entered.set()
        await gate.wait()
        charged.append(ctx.idempotency_key)
        return f"charged {cents}"

    model = ScriptedModel([Reply(tool_calls=[("charge", {"cents": 500})]), "charged"])
    agent = stead.Agent("charger", model, [charge])
    async with Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "charge")
        first = asyncio.ensure_future(rt.run(rid))
        await entered.wait()
        with pytest.raises(LeaseHeld, match="already being driven"):
            await rt.run(rid)
        with pytest.raises(LeaseHeld):
            await rt.resume(rid)
        gate.set()
        view = await first
        assert view.status is RunStatus.COMPLETED
        assert len(charged) == 1
        # Once the first returns, the run may be driven again.
        assert (await rt.run(rid)).status is RunStatus.COMPLETED


async def test_a_worker_handed_back_its_own_run_waits_for_its_first_drive(store: str) -> None:
    """The worker's lease lapses (by its clock) while a handler runs, and claim_next hands the
    run back to the same worker: the new drive waits for the old one, which is fenced, and
    then reconciles the call instead of running it a second time beside the first."""
    now = [1_000_000.0]
    entered, gate = asyncio.Event(), asyncio.Event()
    charged: list[str] = []

    def find(cents: int, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
        return stead.Done("charged") if ctx.idempotency_key in charged else stead.NotDone()

    @stead.tool(effect="non_idempotent", reconcile=find)
    async def charge(cents: int, ctx: stead.ToolContext) -> str:
        """Charge a card."""
        entered.set()
        await gate.wait()
        charged.append(ctx.idempotency_key)
        return f"charged {cents}"

    model = ScriptedModel([Reply(tool_calls=[("charge", {"cents": 500})]), "charged"])
    agent = stead.Agent("charger", model, [charge])
    worker = Worker(store, [agent], lease_ttl=30, poll_interval=0.05, clock=lambda: now[0])
    async with Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "charge")
        serving = asyncio.ensure_future(worker.run())
        try:
            await entered.wait()
            now[0] += 3600  # the lease has lapsed by the worker's clock: claimable again

            async def reclaimed() -> bool:
                return worker.stats["claimed"] >= 2

            await until_async(reclaimed, "the worker to claim the run again")
            gate.set()

            async def completed() -> bool:
                return (await rt.get(rid)).status is RunStatus.COMPLETED

            await until_async(completed, "the run to complete")
        finally:
            gate.set()
            worker.stop()
            await serving
            await worker.close()
        assert len(charged) == 1
        assert worker.stats["fenced"] == 1 and worker.stats["completed"] == 1
        assert worker.stats["conflict"] == 0  # no second driver was even tried
        assert_valid_history(await rt.state(rid))


async def test_cancel_of_a_run_driven_here_goes_through_its_driver(store: str) -> None:
    """Even with its lease lapsed (the clock jumped), a run this Runtime drives is cancelled
    by the driver: cancel does not claim it and fence the driver out mid-tool."""
    entered = asyncio.Event()
    now = [1_000_000.0]

    @stead.tool(effect="read_only")
    async def wait_for_cancel(ctx: stead.ToolContext) -> str:
        """Wait until the run is cancelled."""
        entered.set()
        await ctx.signal.wait()
        return "stopped"

    model = ScriptedModel([Reply(tool_calls=[("wait_for_cancel", {})]), "unreachable"])
    agent = stead.Agent("waiter", model, [wait_for_cancel], limits=stead.Limits(cancel_grace=1.0))
    async with Runtime(store, agents=[agent], clock=lambda: now[0]) as rt:
        rid = await rt.start(agent, "wait")
        driving = asyncio.ensure_future(rt.run(rid))
        await entered.wait()
        now[0] += 3600  # the lease (30 s) has lapsed by this clock
        await rt.cancel(rid, "stop")
        view = await driving  # not Fenced
        assert view.status is RunStatus.CANCELLED
        assert_valid_history(await rt.state(rid))


# -- loops of refused calls --------------------------------------------------------------------


@pytest.mark.parametrize(
    "call", [("nosuch", {"a": 1}), ("add", {"a": "one", "b": 2})], ids=["unknown", "schema"]
)
async def test_a_refused_call_repeated_is_a_loop(store: str, call: tuple[str, object]) -> None:
    model = ScriptedModel([Reply(tool_calls=[call])] * 6 + ["unreachable"])  # type: ignore[list-item]
    agent = stead.Agent("stuck", model, [add], limits=stead.Limits(max_turns=6))
    async with Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED and view.stop_reason == "max_turns"
        assert model.calls == 6  # bounded by max_turns
        loops = [e for e in await _events(rt, rid) if isinstance(e, LoopDetected)]
        assert [e.turn_index for e in loops] == [2, 3, 4, 5]
        assert [e.repeats for e in loops] == [3, 4, 5, 6]
        state = await rt.state(rid)
        loop_results = [
            m
            for m in state.conversation()
            if isinstance(m, ToolResultMessage) and "times in a row" in m.content
        ]
        assert len(loop_results) == 4 and all(m.is_error for m in loop_results)
        assert added == []
