"""Deferred calls and output checks of a Pydantic AI agent under ``SteadDurability``:

* a tool guarding itself the Pydantic AI way (``if not ctx.tool_call_approved: raise
  ApprovalRequired()``) runs once a person approved it in stead (a ``requires_approval``
  policy in its metadata), in the same run;
* a tool that raises ``ApprovalRequired`` / ``CallDeferred`` while running did not act: the
  run waits in ``awaiting_approval`` (approve runs it again, approved; deny is what the model
  reads; ``rt.answer`` gives a deferred call its result), and the same run goes on;
* typed output is judged when the reply is recorded: a field validator's error goes back to
  the model, which answers again (output retries); an ``@agent.output_validator`` added
  after the agent was given to stead (which then did not know to ask it) is refused.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pathlib import Path
from typing import Any

from pydantic import BaseModel, field_validator
from pydantic_ai import Agent, ApprovalRequired, CallDeferred, RunContext
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from wire_server import WireServer
from wire_shapes import anthropic_stream

import stead
from stead.core.states import RunStatus
from stead.pydantic_ai import SteadDurability


def claude(url: str) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-4-6", provider=AnthropicProvider(api_key="sk-ant-test", base_url=url)
    )


def calls(*specs: tuple[str, str, str]) -> Any:
    return anthropic_stream(tools=[(cid, name, [args]) for cid, name, args in specs])


def over_1000(arguments: dict[str, Any]) -> bool:
    return int(arguments.get("cents", 0)) > 1000


async def test_a_tool_that_asks_while_running_waits_on_a_person_in_the_same_run(
    tmp_path: Path,
) -> None:
    ran: list[tuple[str, int]] = []
    with WireServer() as server:
        agent = Agent(claude(server.url), name="guarded", capabilities=[SteadDurability()])

        @agent.tool(metadata={"stead": {"effect": "non_idempotent"}})
        def refund(ctx: RunContext[None], cents: int) -> str:
            """Refund an order; a large refund needs a person's approval."""
            if cents > 1000 and not ctx.tool_call_approved:
                raise ApprovalRequired(metadata={"cents": cents})
            ran.append(("refund", cents))
            return f"refunded {cents}"

        @agent.tool_plain(metadata={"stead": {"effect": "read_only"}})
        def ship(order_id: int) -> str:
            """Ship an order (the warehouse does it)."""
            ran.append(("ship", order_id))
            raise CallDeferred()

        server.push(
            calls(("toolu_1", "ship", '{"order_id": 7}'), ("toolu_2", "refund", '{"cents": 500}')),
            calls(("toolu_3", "refund", '{"cents": 5000}')),
            anthropic_stream("Done."),
        )
        async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
            run_id = await rt.start(agent, "Ship order 7, refund 5 and 50 dollars.")
            view = await rt.run(run_id)
            assert view.status is RunStatus.AWAITING_APPROVAL
            (question,) = view.approvals
            assert question.tool == "ship" and question.reason == "question"
            # The calls of one reply run side by side: their order is not the point.
            assert sorted(ran) == [("refund", 500), ("ship", 7)]
            await rt.answer(run_id, "toolu_1", {"tracking": "TRK-42"}, token=question.token)
            view = await rt.run(run_id)  # a new drive: the agent replays turn 0
            assert view.status is RunStatus.AWAITING_APPROVAL
            (asked,) = view.approvals
            assert asked.tool == "refund" and asked.reason == "policy"
            assert ("refund", 5000) not in ran
            await rt.approve(run_id, "toolu_3", token=asked.token)
            view = await rt.run(run_id)  # again: turns 0 and 1 replayed, the call approved
            log = [e.event for e in await rt.store.read_events(run_id)]
        requests = [str(r.body["messages"]) for r in server.requests]
    assert view.status is RunStatus.COMPLETED and view.run_id == run_id, view.error
    assert view.output == "Done."
    assert sorted(ran) == [("refund", 500), ("refund", 5000), ("ship", 7)]  # none ran twice
    deferred = [(e.tool_call_id, e.ask, e.attempt) for e in log if e.kind == "tool_call_deferred"]  # type: ignore[attr-defined]
    assert deferred == [("toolu_1", "result", 1), ("toolu_3", "approval", 1)]
    results = {e.tool_call_id: e for e in log if e.kind == "tool_result_recorded"}  # type: ignore[attr-defined]
    assert "TRK-42" in results["toolu_1"].content  # type: ignore[attr-defined]
    assert results["toolu_3"].content == "refunded 5000"  # type: ignore[attr-defined]
    assert results["toolu_3"].attempt == 2  # type: ignore[attr-defined]
    assert "TRK-42" in requests[1]  # the model read the answer as the call's result
    assert len(requests) == 3


async def test_a_denied_ask_from_inside_a_tool_is_what_the_model_reads(tmp_path: Path) -> None:
    ran: list[int] = []
    with WireServer() as server:
        agent = Agent(claude(server.url), name="guarded", capabilities=[SteadDurability()])

        @agent.tool(metadata={"stead": {"effect": "non_idempotent"}})
        def refund(ctx: RunContext[None], cents: int) -> str:
            """Refund an order; a large refund needs a person's approval."""
            if not ctx.tool_call_approved:
                raise ApprovalRequired()
            ran.append(cents)
            return "refunded"

        server.push(calls(("toolu_1", "refund", '{"cents": 5000}')), anthropic_stream("No."))
        async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
            run_id = await rt.start(agent, "Refund 50 dollars.")
            view = await rt.run(run_id)
            await rt.deny(run_id, "toolu_1", "over the limit", token=view.approvals[0].token)
            view = await rt.run(run_id)
        second = str(server.requests[1].body["messages"])
    assert view.status is RunStatus.COMPLETED and view.output == "No."
    assert ran == []
    assert "over the limit" in second


async def test_a_tool_guarding_itself_runs_once_a_policy_in_stead_approved_it(
    tmp_path: Path,
) -> None:
    ran: list[int] = []
    with WireServer() as server:
        agent = Agent(claude(server.url), name="policed", capabilities=[SteadDurability()])

        @agent.tool(metadata={"stead": {"requires_approval": over_1000}})
        def refund(ctx: RunContext[None], cents: int) -> str:
            """Refund an order; a large refund needs a person's approval."""
            if cents > 1000 and not ctx.tool_call_approved:
                raise ApprovalRequired()
            ran.append(cents)
            return f"refunded {cents}"

        server.push(calls(("toolu_1", "refund", '{"cents": 5000}')), anthropic_stream("Done."))
        async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
            run_id = await rt.start(agent, "Refund 50 dollars.")
            view = await rt.run(run_id)
            assert ran == []  # asked before it ran: the policy, not the tool
            await rt.approve(run_id, "toolu_1", token=view.approvals[0].token)
            view = await rt.run(run_id)
            kinds = [e.event.kind for e in await rt.store.read_events(run_id)]
    assert view.status is RunStatus.COMPLETED and ran == [5000]
    assert "tool_call_deferred" not in kinds


class Answer(BaseModel):
    city: str
    population: int

    @field_validator("population")
    @classmethod
    def positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("a population is a positive count of people")
        return value


async def test_typed_output_a_validator_refuses_is_answered_again(tmp_path: Path) -> None:
    with WireServer() as server:
        agent = Agent(
            claude(server.url),
            name="typed_retry",
            output_type=Answer,
            capabilities=[SteadDurability()],
        )
        server.push(
            calls(("toolu_1", "final_result", '{"city": "Paris", "population": -1}')),
            calls(("toolu_2", "final_result", '{"city": "Paris", "population": 2100000}')),
        )
        async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
            view = await rt.run(await rt.start(agent, "How many live in Paris?"))
        retried = str(server.requests[1].body["messages"])
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.data == Answer(city="Paris", population=2_100_000)
    assert "a population is a positive count of people" in retried


async def test_an_output_validator_added_after_the_agent_was_given_is_refused(
    tmp_path: Path,
) -> None:
    agent = Agent(TestModel(), name="validated", capabilities=[SteadDurability()])
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:

        @agent.output_validator
        def shout(text: str) -> str:
            return text.upper()

        view = await rt.run(await rt.start(agent, "Hello"))
    assert view.status is RunStatus.FAILED
    assert "output validator was added after" in str(view.error)
