"""Runs that cannot run away: turn ceilings, per-turn call limits, budgets, loop detection,
approval deadlines. In one process, on the ScriptedModel, against a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

import stead
from stead.core.decide import FINAL_TURN_NOTICE
from stead.core.events import (
    LoopDetected,
    NoticeInjected,
    RunFailed,
    ToolResultRecorded,
)
from stead.core.messages import NoticeMessage, ToolResultMessage, Usage
from stead.core.pricing import Price, PriceTable
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.testing import Reply, ScriptedModel, assert_valid_history


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


calls: list[dict[str, int]] = []


@stead.tool(effect="read_only")
def add(a: int, b: int) -> int:
    """Add two integers."""
    calls.append({"a": a, "b": b})
    return a + b


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()


async def _events(rt: stead.Runtime, rid: str) -> list[object]:
    return [e.event for e in await rt.events(rid)]


async def test_final_turn_notice_then_handoff_at_max_turns(store: str) -> None:
    requests: list[ModelRequest] = []

    def turn(i: int) -> Reply:
        def reply(request: ModelRequest) -> Reply:
            requests.append(request)
            text = "Handoff: added 0+1 and 1+1; still to do: 2+1." if i == 2 else ""
            return Reply(text=text, tool_calls=[("add", {"a": i, "b": 1})])

        return reply  # type: ignore[return-value]

    model = ScriptedModel([turn(0), turn(1), turn(2), "unreachable"])
    agent = stead.Agent("stubborn", model, [add], limits=stead.Limits(max_turns=3))
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "add things")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED
        assert view.stop_reason == "max_turns"
        assert view.output == "Handoff: added 0+1 and 1+1; still to do: 2+1."
        # The notice is in the request of turn max_turns - 1 = 2, and only there.
        notices = [[m for m in r.messages if isinstance(m, NoticeMessage)] for r in requests]
        assert [len(n) for n in notices] == [0, 0, 1]
        assert notices[2][0].content == FINAL_TURN_NOTICE
        events = await _events(rt, rid)
        assert [e.turn_index for e in events if isinstance(e, NoticeInjected)] == [2]
        # Its tool call got an error result and did not run.
        assert calls == [{"a": 0, "b": 1}, {"a": 1, "b": 1}]
        last = [e for e in events if isinstance(e, ToolResultRecorded)][-1]
        assert last.is_error and last.source == "limit" and "limit of 3 turns" in last.content
        assert_valid_history(await rt.state(rid))


async def test_calls_beyond_the_per_turn_limit_get_error_results(store: str) -> None:
    model = ScriptedModel([Reply(tool_calls=[("add", {"a": i, "b": 0}) for i in range(4)]), "done"])
    agent = stead.Agent("greedy", model, [add], limits=stead.Limits(max_tool_calls_per_turn=2))
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        assert (await rt.run(rid)).status is RunStatus.COMPLETED
        assert sorted(c["a"] for c in calls) == [0, 1]
        results = [e for e in await _events(rt, rid) if isinstance(e, ToolResultRecorded)]
        limited = sorted(r.tool_call_id for r in results if r.source == "limit")
        assert limited == ["call_0_2", "call_0_3"]
        assert all("at most 2 tool calls" in r.content for r in results if r.source == "limit")


async def test_three_identical_calls_in_a_row_are_intercepted(store: str) -> None:
    same = ("add", {"a": 2, "b": 2})
    seen: list[ModelRequest] = []

    def last(request: ModelRequest) -> str:
        seen.append(request)
        return "ok, stopping"

    model = ScriptedModel(
        [Reply(tool_calls=[same]), Reply(tool_calls=[same]), Reply(tool_calls=[same]), last]
    )
    agent = stead.Agent("looper", model, [add])
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        assert (await rt.run(rid)).status is RunStatus.COMPLETED
        assert len(calls) == 2  # the third identical call did not run
        (loop,) = [e for e in await _events(rt, rid) if isinstance(e, LoopDetected)]
        assert loop.repeats == 3 and loop.turn_index == 2
        result = seen[0].messages[-1]
        assert isinstance(result, ToolResultMessage) and result.is_error
        assert "different strategy" in result.content


async def test_loop_threshold_is_configurable_and_different_calls_reset_it(store: str) -> None:
    a, b = ("add", {"a": 1, "b": 1}), ("add", {"a": 9, "b": 9})
    model = ScriptedModel(
        [
            Reply(tool_calls=[a]),
            Reply(tool_calls=[b]),
            Reply(tool_calls=[a]),
            Reply(tool_calls=[a]),
            "done",
        ]
    )
    agent = stead.Agent("varied", model, [add], limits=stead.Limits(repeat_threshold=2))
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        await rt.run(rid)
        loops = [e for e in await _events(rt, rid) if isinstance(e, LoopDetected)]
        assert [e.turn_index for e in loops] == [3]
        assert len(calls) == 3


PRICES = PriceTable(
    {"metered": Price(input=1_000_000.0, output=1_000_000.0, cache_write=0.0, cache_read=0.0)}
)


async def test_budget_halts_before_the_turn_that_would_breach_it(store: str) -> None:
    usage = Usage(input_tokens=100, output_tokens=50)
    model = ScriptedModel(
        [Reply(tool_calls=[("add", {"a": 1, "b": 1})], usage=usage)] * 5, name="metered"
    )
    budget = stead.Budget(max_total_tokens=500)
    agent = stead.Agent(
        "thrifty", model, [add], budget=budget, max_output_tokens=100, prices=PRICES
    )
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        view = await rt.run(rid)
        assert view.status is RunStatus.FAILED
        assert view.error is not None and view.error["code"] == "budget_exceeded"
        # 150 tokens a turn. After three (450 spent) the fourth turn's estimate (its prompt
        # plus 100 max output tokens) would pass 500: the model is not called a fourth time.
        assert model.calls == 3
        assert view.usage == usage + usage + usage
        (failed,) = [e for e in await _events(rt, rid) if isinstance(e, RunFailed)]
        assert failed.details is not None
        assert failed.details["spent"]["input_tokens"] == 300
        assert failed.details["next_turn_estimate"]["output_tokens"] == 100
        assert "would breach" in failed.message


async def test_dollar_budget_uses_the_price_table(store: str) -> None:
    usage = Usage(input_tokens=100, output_tokens=100)  # $200 a turn at $1 a token
    model = ScriptedModel(
        [Reply(tool_calls=[("add", {"a": 1, "b": 1})], usage=usage)] * 9, name="metered"
    )
    agent = stead.Agent(
        "dollars",
        model,
        [add],
        budget=stead.Budget(max_usd=1_000.0),
        max_output_tokens=10,
        prices=PRICES,
    )
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        view = await rt.run(rid)
        assert view.error is not None and view.error["code"] == "budget_exceeded"
        (failed,) = [e for e in await _events(rt, rid) if isinstance(e, RunFailed)]
        assert failed.details is not None
        spent, nxt = failed.details["spent"]["usd"], failed.details["next_turn_estimate"]["usd"]
        assert spent == pytest.approx(200.0 * model.calls)
        assert spent <= 1_000.0 < spent + nxt
        assert 0 < model.calls < 9  # halted before the turn that would overspend


def test_dollar_budget_needs_a_price() -> None:
    with pytest.raises(stead.UserError, match="price"):
        stead.Agent("x", ScriptedModel([], name="unpriced-model"), budget=stead.Budget(max_usd=1.0))


def test_default_prices_find_dated_model_names() -> None:
    table = PriceTable()
    assert table.get("claude-sonnet-4-5-20250929") == table.get("claude-sonnet-4-5")
    assert table.get("openai:gpt-4.1-mini") == Price(0.40, 1.60, 0.40, 0.10)
    assert table.cost(Usage(input_tokens=1_000_000), "gpt-4.1") == pytest.approx(2.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@stead.tool(effect="non_idempotent", requires_approval=True)
def wire_money(cents: int) -> str:
    """Wire money (always needs a person)."""
    return f"wired {cents}"


async def test_approval_deadline_times_the_run_out_and_resume_asks_again(store: str) -> None:
    clock = Clock()
    model = ScriptedModel([Reply(tool_calls=[("wire_money", {"cents": 5})]), "sent"])
    agent = stead.Agent("payer", model, [wire_money], limits=stead.Limits(approval_timeout=3600))
    async with stead.Runtime(store, agents=[agent], clock=clock) as rt:
        rid = await rt.start(agent, "pay")
        view = await rt.run(rid)
        assert view.status is RunStatus.AWAITING_APPROVAL
        (first,) = view.approvals
        clock.now += 3599
        assert await rt.expire_approvals() == []
        clock.now += 2
        assert await rt.expire_approvals() == [rid]
        assert (await rt.get(rid)).status is RunStatus.TIMED_OUT
        with pytest.raises(stead.ApprovalError):
            await rt.approve(rid, first.tool_call_id, token=first.token)
        view = await rt.resume(rid)
        assert view.status is RunStatus.AWAITING_APPROVAL
        (again,) = view.approvals
        assert again.token != first.token
        await rt.approve(rid, again.tool_call_id, token=again.token)
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "sent"


async def test_late_decision_moves_the_run_to_timed_out(store: str) -> None:
    clock = Clock()
    model = ScriptedModel([Reply(tool_calls=[("wire_money", {"cents": 5})]), "sent"])
    agent = stead.Agent("payer", model, [wire_money], limits=stead.Limits(approval_timeout=60))
    async with stead.Runtime(store, agents=[agent], clock=clock) as rt:
        rid = await rt.start(agent, "pay")
        (pending,) = (await rt.run(rid)).approvals
        clock.now += 61
        with pytest.raises(stead.ApprovalError, match="deadline"):
            await rt.approve(rid, pending.tool_call_id, token=pending.token)
        assert (await rt.get(rid)).status is RunStatus.TIMED_OUT


async def test_cancel_of_a_waiting_run_closes_its_calls(store: str) -> None:
    model = ScriptedModel([Reply(tool_calls=[("wire_money", {"cents": 5})]), "after resume"])
    agent = stead.Agent("payer", model, [wire_money])
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "pay")
        await rt.run(rid)
        view = await rt.cancel(rid, "not today")
        assert view.status is RunStatus.CANCELLED
        state = await rt.state(rid)
        assert_valid_history(state)
        with pytest.raises(stead.IllegalTransition):
            await rt.cancel(rid, "again")
        view = await rt.resume(rid)
        assert view.status is RunStatus.COMPLETED and view.output == "after resume"
