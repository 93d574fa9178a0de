"""The run loop in one process: turns, bad input from the model, steering errors, retries."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import stead
import stead.store
from _wait import until_async
from stead.core.events import (
    AssistantMessageRecorded,
    ModelCallFailed,
    RunCompleted,
    ToolResultRecorded,
    TurnStarted,
)
from stead.core.fold import fold
from stead.core.messages import ToolCall, ToolResultMessage
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.runtime import Backoff, OwnedRun
from stead.testing import Reply, ScriptedModel, VirtualClock, assert_valid_history

FAST = Backoff(base=0.001, cap=0.002)


@stead.tool(effect="read_only")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


async def _kinds(rt: stead.Runtime, run_id: str) -> list[str]:
    return [e.event.kind for e in await rt.events(run_id)]


async def test_a_turn_with_a_tool_then_an_answer(store: str) -> None:
    model = ScriptedModel([Reply(tool_calls=[("add", {"a": 2, "b": 3})]), "5"])
    agent = stead.Agent("calc", model, [add])
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "2+3?")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "5"
        assert await _kinds(rt, rid) == [
            "run_created",
            "agent_recorded",  # the agent version, with the drive's first commit
            "run_started",
            "turn_started",
            "assistant_message",
            "tool_call_requested",
            "tool_result_recorded",
            "turn_started",
            "assistant_message",
            "run_completed",
        ]
        events = [e.event for e in await rt.events(rid)]
        (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
        assert result.content == "5" and not result.is_error
        replies = [e for e in events if isinstance(e, AssistantMessageRecorded)]
        total = replies[0].usage + replies[1].usage
        assert view.usage == total
        (done,) = [e for e in events if isinstance(e, RunCompleted)]
        assert done.usage == total


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("no_such_tool", '{"a": 1}', "unknown tool 'no_such_tool'"),
        ("add", '{"a": 1, "b": ', "not valid JSON"),
        ("add", '{"a": "one", "b": 2}', "a:"),
        ("add", "[1, 2]", "object"),
        ("add", '{"a": 1}', "b"),
    ],
)
async def test_model_mistakes_become_error_results_it_reads(
    store: str, name: str, arguments: str, says: str
) -> None:
    seen: list[ModelRequest] = []

    def second(request: ModelRequest) -> str:
        seen.append(request)
        return "I will stop guessing."

    model = ScriptedModel(
        [Reply(tool_calls=[ToolCall(id="c1", name=name, arguments=arguments)]), second]
    )
    agent = stead.Agent("careless", model, [add])
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED
        (request,) = seen
        result = request.messages[-1]
        assert isinstance(result, ToolResultMessage) and result.is_error
        assert says.lower() in result.content.lower(), result.content
        assert_valid_history(await rt.state(rid))


async def test_tools_of_one_reply_run_concurrently(store: str) -> None:
    gate = asyncio.Event()

    @stead.tool(effect="read_only")
    async def wait_for_other() -> str:
        """Finishes only when the other call has started."""
        await asyncio.wait_for(gate.wait(), timeout=10)
        return "waited"

    @stead.tool(effect="read_only")
    async def open_gate() -> str:
        """Lets the other call finish."""
        gate.set()
        return "opened"

    model = ScriptedModel(
        [Reply(tool_calls=[("wait_for_other", {}), ("open_gate", {})]), "both done"]
    )
    agent = stead.Agent("pair", model, [wait_for_other, open_gate])
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        assert (await rt.run(rid)).output == "both done"
        state = await rt.state(rid)
        # Results are recorded as they finish (open_gate first) but the model sees call order.
        results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
        assert [r.name for r in results] == ["open_gate", "wait_for_other"]
        ordered = [m for m in state.conversation() if isinstance(m, ToolResultMessage)]
        assert [r.name for r in ordered] == ["wait_for_other", "open_gate"]


async def test_retryable_model_failures_are_retried_and_recorded(store: str) -> None:
    model = ScriptedModel([Reply(text="fine", error="rate_limited", fail_times=2)])
    agent = stead.Agent("flaky", model)
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "hi")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "fine"
        failures = [e.event for e in await rt.events(rid) if isinstance(e.event, ModelCallFailed)]
        assert [(f.attempt, f.code) for f in failures] == [(1, "rate_limited"), (2, "rate_limited")]
        assert model.calls == 3


async def test_non_retryable_failure_fails_the_run_and_resume_continues(store: str) -> None:
    model = ScriptedModel([Reply(text="recovered", error="bad_request", fail_times=1)])
    agent = stead.Agent("strict", model)
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "hi")
        view = await rt.run(rid)
        assert view.status is RunStatus.FAILED
        assert view.error is not None and view.error["code"] == "bad_request"
        view = await rt.resume(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "recovered"
        kinds = await _kinds(rt, rid)
        assert "run_requeued" in kinds and kinds.count("assistant_message") == 1


async def test_retries_are_bounded(store: str) -> None:
    model = ScriptedModel([Reply(text="never", error="provider_unavailable")])
    agent = stead.Agent("down", model, limits=stead.Limits(max_model_attempts=3))
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "hi")
        view = await rt.run(rid)
        assert view.status is RunStatus.FAILED
        assert view.error is not None and view.error["code"] == "provider_unavailable"
        assert model.calls == 3


async def test_steering_mistakes_are_clear_errors_and_change_nothing(store: str) -> None:
    agent = stead.Agent("calc", ScriptedModel(["4"]))
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "2+2?")
        await rt.run(rid)
        before = len(await rt.events(rid))
        with pytest.raises(stead.ApprovalError, match="no pending approval"):
            await rt.approve(rid, "call_0_0")
        with pytest.raises(stead.UserError, match="completed"):
            await rt.resume(rid)
        with pytest.raises(stead.IllegalTransition):
            await rt.cancel(rid)
        with pytest.raises(stead.RunNotFound, match="runs list"):
            await rt.get("run_missing")
        assert len(await rt.events(rid)) == before


async def test_illegal_append_is_refused_before_writing(store: str) -> None:
    agent = stead.Agent("calc", ScriptedModel(["4"]))
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "2+2?")
        state, _ = await OwnedRun.load_state(rt.store, rid)
        session = OwnedRun(
            rt.store, state, epoch=0, owner="t", clock=lambda: 0.0, tools={}, limits=stead.Limits()
        )
        with pytest.raises(stead.IllegalTransition, match="queued"):
            await session.append([TurnStarted(turn_index=0)])  # queued -> running needs run_started
        assert await _kinds(rt, rid) == ["run_created"]
        assert session.state.status is RunStatus.QUEUED


async def test_cancel_then_resume_completes(store: str) -> None:
    agent = stead.Agent("calc", ScriptedModel(["4"]))
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "2+2?")
        view = await rt.cancel(rid, "changed my mind")
        assert view.status is RunStatus.CANCELLED
        view = await rt.resume(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "4"


async def test_a_run_needs_its_agent(store: str) -> None:
    agent = stead.Agent("calc", ScriptedModel(["4"]))
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "2+2?")
    async with stead.Runtime(store) as other:
        with pytest.raises(stead.UnknownAgent, match="calc"):
            await other.run(rid)


async def test_snapshots_keep_resume_cost_flat(store: str) -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[("add", {"a": i, "b": 1})]) for i in range(40)] + ["done"]
    )
    agent = stead.Agent("long", model, [add], limits=stead.Limits(max_turns=100))
    async with stead.Runtime(store, agents=[agent], snapshot_every=16) as rt:
        rid = await rt.start(agent, "count")
        assert (await rt.run(rid)).status is RunStatus.COMPLETED
        loaded = await rt.store.load(rid)
        assert loaded.snapshot is not None and len(loaded.tail) < 16
        from_snapshot, _ = await OwnedRun.load_state(rt.store, rid)
        full = fold(e.event for e in await rt.events(rid))
        assert from_snapshot.to_json() == full.to_json()


stubborn_log: list[str] = []
stubborn_started: list[asyncio.Event] = []


@stead.tool(effect="read_only")
async def stubborn(n: int) -> str:
    """Ignores the abort signal: only being cancelled stops it."""
    stubborn_log.append(f"start {n}")
    stubborn_started[0].set()
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        stubborn_log.append(f"cancelled {n}")
        raise
    return "never"


@pytest.mark.parametrize("calls", [1, 2], ids=["one call", "two calls"])
async def test_a_tool_that_ignores_the_abort_is_cut_off_after_the_grace(
    store: str, calls: int
) -> None:
    # One open call is settled in the loop's own task, several in a task each: both must
    # give the grace period, then cancel the handler and close every call as cancelled.
    stubborn_log.clear()
    stubborn_started[:] = [asyncio.Event()]  # one per test: an Event binds to its loop
    model = ScriptedModel([Reply(tool_calls=[("stubborn", {"n": i}) for i in range(calls)]), "x"])
    agent = stead.Agent("stubborn", model, [stubborn], limits=stead.Limits(cancel_grace=0.3))
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        driving = asyncio.ensure_future(rt.run(rid))
        await asyncio.wait_for(stubborn_started[0].wait(), timeout=10)
        # Every call started (they start together, but a loaded machine may run the first
        # handler well before the second): a cancel before then never meets the second.
        await until_async(lambda: len(stubborn_log) == calls, "every call started", timeout=20)
        await rt.cancel(rid, "enough")
        view = await asyncio.wait_for(driving, timeout=10)
        assert view.status is RunStatus.CANCELLED
        assert sorted(stubborn_log) == sorted(
            [f"start {i}" for i in range(calls)] + [f"cancelled {i}" for i in range(calls)]
        )
        events = [e.event for e in await rt.events(rid)]
        results = [e for e in events if isinstance(e, ToolResultRecorded)]
        assert len(results) == calls and all(r.source == "cancelled" for r in results)
        assert_valid_history(fold(events))
        # The loop's task carries no leftover cancellation: the runtime is still usable.
        assert (await rt.resume(rid)).status is RunStatus.COMPLETED


class _WatchFailsAtFirst:
    """A store whose first few reads of a run's row fail once ``armed`` (the drive under
    way), as while a database restarts: the reads the cancel watch makes."""

    def __init__(self, store: stead.store.Store, failures: int) -> None:
        self.store = store
        self.failures = failures
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def last_seqs(self, run_ids: Sequence[str]) -> dict[str, int]:
        if self.armed and self.failures > 0:
            self.failures -= 1
            raise stead.StoreError("the database is restarting")
        return await self.store.last_seqs(run_ids)


def test_the_cancel_watcher_outlives_failed_reads(store: str) -> None:
    # On a virtual clock: the keeper's production beat, and its failed reads met in virtual
    # time, so no machine is too slow for the three beats the test needs.
    clock = VirtualClock()
    clock.run(_watch_outlives_failed_reads(store, clock))


async def _watch_outlives_failed_reads(store: str, clock: VirtualClock) -> None:
    # The owner's watcher meets three failed reads before the cancel is written; it keeps
    # watching, so the cancel another process writes still stops the run.
    stubborn_log.clear()
    stubborn_started[:] = [asyncio.Event()]
    model = ScriptedModel([Reply(tool_calls=[("stubborn", {"n": 0})]), "x"])
    agent = stead.Agent("watched", model, [stubborn], limits=stead.Limits(cancel_grace=5))
    flaky = _WatchFailsAtFirst(stead.store.open_store(store), failures=3)
    async with stead.Runtime(flaky, agents=[agent], clock=clock) as owner:  # type: ignore[arg-type]
        rid = await owner.start(agent, "go")
        driving = asyncio.ensure_future(owner.run(rid))
        await asyncio.wait_for(stubborn_started[0].wait(), timeout=10)
        flaky.armed = True
        # The keeper reads every beat: it met every failure once it read three more times
        # (a watcher that stopped at the first would leave failures above 0: timed out).
        await until_async(lambda: flaky.failures == 0, "every failure met", timeout=20)
        async with stead.Runtime(store, agents=[agent], clock=clock) as other:
            await other.cancel(rid, "stop")
        view = await asyncio.wait_for(driving, timeout=10)
        assert view.status is RunStatus.CANCELLED
        assert stubborn_log == ["start 0", "cancelled 0"]


ran: list[str] = []


@stead.tool(effect="read_only")
async def look_up(order_id: int) -> str:
    """Look an order up."""
    ran.append(f"look_up {order_id}")
    return "shipped"


@stead.tool(effect="non_idempotent", requires_approval=True)
async def refund(order_id: int) -> str:
    """Refund an order (a person approves first)."""
    ran.append(f"refund {order_id}")
    return "refunded"


async def test_a_call_waiting_on_a_person_does_not_hold_back_its_siblings(store: str) -> None:
    ran.clear()
    model = ScriptedModel(
        [Reply(tool_calls=[("refund", {"order_id": 7}), ("look_up", {"order_id": 7})]), "Done."]
    )
    agent = stead.Agent("shop", model, [refund, look_up])
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "refund order 7 if it shipped")
        view = await rt.run(rid)
        # The lookup ran and its result is recorded while the refund waits for a person.
        assert view.status is RunStatus.AWAITING_APPROVAL
        assert ran == ["look_up 7"]
        results = [e.event for e in await rt.events(rid) if e.event.kind == "tool_result_recorded"]
        assert [r.name for r in results] == ["look_up"]  # type: ignore[attr-defined]
        (pending,) = view.approvals
        view = await rt.approve(rid, pending.tool_call_id, token=pending.token)
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "Done."
        assert ran == ["look_up 7", "refund 7"]  # each once
        assert_valid_history(fold(e.event for e in await rt.events(rid)))


look_up_gate: list[asyncio.Event] = []


@stead.tool(effect="read_only", name="look_up")
async def look_up_slowly(order_id: int) -> str:
    """Look an order up; the first attempt hangs until its worker dies."""
    ran.append(f"look_up {order_id}")
    if len(ran) == 1:
        look_up_gate[1].set()
        await look_up_gate[0].wait()
    return "shipped"


async def test_a_sibling_left_in_flight_by_a_dead_worker_is_run_before_the_decision(
    store: str,
) -> None:
    ran.clear()
    # [never set: the first worker dies in the lookup, set when the lookup has begun]
    look_up_gate[:] = [asyncio.Event(), asyncio.Event()]
    model = ScriptedModel(
        [Reply(tool_calls=[("refund", {"order_id": 7}), ("look_up", {"order_id": 7})]), "Done."]
    )
    agent = stead.Agent("shop", model, [refund, look_up_slowly])
    async with stead.Runtime(store, agents=[agent]) as first:
        rid = await first.start(agent, "refund order 7 if it shipped")
        driving = asyncio.ensure_future(first.run(rid))
        await asyncio.wait_for(look_up_gate[1].wait(), timeout=10)
        driving.cancel()  # the worker dies mid-lookup (its lease is let go)
        with pytest.raises(asyncio.CancelledError):
            await driving
    async with stead.Runtime(store, agents=[agent]) as second:
        view = await second.run(rid)  # waiting on a person, yet the lookup is driven now
        assert view.status is RunStatus.AWAITING_APPROVAL
        assert ran == ["look_up 7", "look_up 7"]
        events = [e.event for e in await second.events(rid)]
        assert [e.name for e in events if e.kind == "tool_result_recorded"] == ["look_up"]  # type: ignore[attr-defined]
        assert (await second.run(rid)).status is RunStatus.AWAITING_APPROVAL  # nothing to do
        assert ran == ["look_up 7", "look_up 7"]
