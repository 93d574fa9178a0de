"""A Pydantic AI agent's own output validators under SteadDurability: a validator that raises
``ModelRetry`` is a refused answer the model reads (recorded in the reply's commit, replayed
like any step), and the run's output is what the validator returned."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pathlib import Path
from typing import Any

from _pai_agents import agent as make_agent
from pydantic import BaseModel
from pydantic_ai import ModelRetry
from wire_server import WireServer
from wire_shapes import anthropic_stream

import stead
from stead.core.states import RunStatus


@pytest.fixture
def server() -> Any:
    with WireServer() as srv:
        yield srv


async def events(rt: stead.Runtime, run_id: str) -> list[Any]:
    return [e.event for e in await rt.store.read_events(run_id)]


async def test_a_refused_text_answer_is_retried_and_the_output_is_the_validators(
    server: WireServer, tmp_path: Path
) -> None:
    agent = make_agent(server.url)
    seen: list[str] = []

    @agent.output_validator
    def polite(text: str) -> str:
        seen.append(text)
        if "please" not in text:
            raise ModelRetry("say please")
        return text.upper()

    @agent.tool_plain(requires_approval=True, metadata={"stead": {"effect": "read_only"}})
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    tool = anthropic_stream(tools=[("toolu_1", "lookup", ['{"q": "x"}'])])
    server.push(anthropic_stream("No."), tool, anthropic_stream("Yes, please."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Ask nicely")
        view = await rt.run(run_id)
        # The retry is in the log before the approval pause; the next drive replays it.
        assert view.status is RunStatus.AWAITING_APPROVAL
        await rt.approve(run_id, "toolu_1", token=view.approvals[0].token)
        view = await rt.run(run_id)
        log = await events(rt, run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "YES, PLEASE."
    notices = [e for e in log if e.kind == "notice_injected"]
    assert len(notices) == 1 and "say please" in notices[0].content
    assert "say please" in str(server.requests[1].body["messages"])
    # Three model requests in all: the second drive read turns 0 and 1 back from the log, and
    # its validator read the refused answer again (a replay), without asking the model.
    assert len(server.requests) == 3
    assert seen == ["No.", "No.", "Yes, please."]


class Answer(BaseModel):
    city: str
    population: int


async def test_a_refused_final_result_is_an_error_result_and_the_output_is_the_validators(
    server: WireServer, tmp_path: Path
) -> None:
    agent = make_agent(server.url, output_type=Answer)

    @agent.output_validator
    def known(answer: Answer) -> Answer:
        if answer.population < 1000:
            raise ModelRetry("that is a village; give a city")
        return Answer(city=answer.city.upper(), population=answer.population)

    def final(cid: str, args: str) -> Any:
        return anthropic_stream(tools=[(cid, "final_result", [args])])

    server.push(
        final("toolu_1", '{"city": "Ys", "population": 12}'),
        final("toolu_2", '{"city": "Paris", "population": 2100000}'),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "A city?")
        view = await rt.run(run_id)
        log = await events(rt, run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.data == Answer(city="PARIS", population=2_100_000)
    results = [e for e in log if e.kind == "tool_result_recorded"]
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("toolu_1", True),
        ("toolu_2", False),
    ]
    assert "give a city" in results[0].content
    assert "give a city" in str(server.requests[1].body["messages"])


async def test_an_answer_refused_past_the_agents_retries_fails_the_run(
    server: WireServer, tmp_path: Path
) -> None:
    agent = make_agent(server.url)

    @agent.output_validator
    def never(text: str) -> str:
        raise ModelRetry("no")

    server.push(anthropic_stream("One."), anthropic_stream("Two."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Answer")
        view = await rt.run(run_id)
    assert view.status is RunStatus.FAILED
    assert view.error is not None and view.error["code"] == "output_invalid"
    assert len(server.requests) == 2
