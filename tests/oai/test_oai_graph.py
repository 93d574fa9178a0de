"""Handoffs in one process: the agents an agent can hand off to share one set of tools and
settings, the handoff is a recorded call, the SDK's second handoff of a reply is recorded as
it answers it, and what stead cannot recover (hosted tools, clashing names) is refused."""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, WebSearchTool, function_tool, handoff
from openai import AsyncOpenAI
from wire_server import WireServer
from wire_shapes import openai_stream

import stead
import stead.openai_agents as sa
from stead.core.states import RunStatus
from stead.errors import UserError


@pytest.fixture(scope="module")
def server() -> Any:
    with WireServer() as srv:
        yield srv


@pytest.fixture
async def llm(server: WireServer) -> AsyncIterator[OpenAIChatCompletionsModel]:
    client = AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0)
    yield OpenAIChatCompletionsModel("gpt-4.1", openai_client=client)
    await client.close()


def _refunds(done: list[int]) -> Any:
    @function_tool
    def refund(cents: int) -> str:
        """Refund an amount."""
        done.append(cents)
        return "refunded"

    return refund


async def test_a_handoff_is_a_recorded_call_and_the_run_goes_on_with_the_agent_handed_to(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    done: list[int] = []
    billing = Agent(name="billing", instructions="You refund.", model=llm, tools=[_refunds(done)])
    shipping = Agent(name="shipping", instructions="You ship.", model=llm)
    triage = Agent(name="triage", model=llm, handoffs=[billing, handoff(shipping)])
    agent = sa.durable(triage, tools={"refund": {"effect": "idempotent_write"}})
    server.requests.clear()
    server.push(
        openai_stream(
            tools=[
                ("call_b", "transfer_to_billing", ["{}"]),
                ("call_s", "transfer_to_shipping", ["{}"]),
            ]
        ),
        openai_stream(tools=[("call_r", "refund", ['{"cents": 500}'])]),
        openai_stream("Refunded."),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Refund my order")
        view = await rt.run(run_id)
        log = [e.event for e in await rt.store.read_events(run_id)]
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "Refunded." and done == [500]
    results = {e.tool_call_id: e.content for e in log if e.kind == "tool_result_recorded"}
    assert json.loads(results["call_b"]) == {"assistant": "billing"}
    assert results["call_s"] == "Multiple handoffs detected, ignoring this one."  # as the SDK
    requested = {e.tool_call_id: e.effect_class for e in log if e.kind == "tool_call_requested"}
    assert requested == {"call_b": "read_only", "call_s": "read_only", "call_r": "idempotent_write"}
    asked = [r.body["messages"][0]["content"] for r in server.requests]
    assert asked[1:] == ["You refund.", "You refund."]  # billing's model, from the handoff on


def test_tools_of_the_agents_handed_to_are_one_set(llm: Any) -> None:
    first = Agent(name="first", model=llm, tools=[_refunds([])])
    second = Agent(name="second", model=llm, tools=[_refunds([])])  # another tool, same name
    with pytest.raises(UserError, match="two different tools are named 'refund'"):
        sa.durable(Agent(name="triage", model=llm, handoffs=[first, second]))
    with pytest.raises(UserError, match="names no tool of the agent or of an agent it hands"):
        sa.durable(Agent(name="triage", model=llm, handoffs=[first]), tools={"send": {}})


def test_hosted_tools_are_refused_saying_why(llm: Any) -> None:
    helper = Agent(name="helper", model=llm, tools=[WebSearchTool()])
    with pytest.raises(UserError, match=r"WebSearchTool tools are not supported.*hosted tools"):
        sa.durable(Agent(name="triage", model=llm, handoffs=[helper]))


def test_a_model_given_by_name_is_refused_for_an_agent_handed_to(llm: Any) -> None:
    helper = Agent(name="helper", model="gpt-4.1")
    with pytest.raises(UserError, match="'helper': give it a model object"):
        sa.durable(Agent(name="triage", model=llm, handoffs=[helper]))


async def test_a_handoff_beside_a_call_waiting_for_a_person_runs_on_handoff_once(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    handed: list[str] = []

    @function_tool(needs_approval=True)
    def refund(cents: int) -> str:
        """Refund an amount."""
        return "refunded"

    billing = Agent(name="billing", instructions="You bill.", model=llm)
    triage = Agent(
        name="triage",
        model=llm,
        tools=[refund],
        handoffs=[handoff(billing, on_handoff=lambda ctx: handed.append("billing"))],
    )
    agent = sa.durable(triage)
    server.requests.clear()
    server.push(
        openai_stream(
            tools=[
                ("call_r", "refund", ['{"cents": 5}']),
                ("call_h", "transfer_to_billing", ["{}"]),
            ]
        ),
        openai_stream("Billing here."),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Refund and bill")
        view = await rt.run(run_id)
        # The turn's handoff did not wait behind the refund's person: the run rests.
        assert view.status is RunStatus.AWAITING_APPROVAL
        await rt.approve(run_id, "call_r", token=view.approvals[0].token)
        view = await rt.run(run_id)  # a second drive replays the turn, handoff included
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "Billing here."
    assert handed == ["billing"]  # recorded with its call in the first drive, not run again
    assert server.requests[-1].body["messages"][0]["content"] == "You bill."
