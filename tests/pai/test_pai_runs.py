"""A Pydantic AI agent with SteadDurability, driven in this process: its model requests are
the run's model turns, its tool calls the run's tool calls, with stead's states, approvals,
typed output, streaming progress and conversations."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import asyncio
from pathlib import Path
from typing import Any

from _pai_agents import agent as make_agent
from pydantic import BaseModel
from pydantic_ai import ApprovalRequired, ModelRetry
from pydantic_ai.capabilities import AbstractCapability
from wire_server import WireServer
from wire_shapes import anthropic_stream

import stead
from stead.core.states import RunStatus
from stead.pydantic_ai import tool_context


@pytest.fixture
def server() -> Any:
    with WireServer() as srv:
        yield srv


def calls(*specs: tuple[str, str, str]) -> Any:
    return anthropic_stream(tools=[(cid, name, [args]) for cid, name, args in specs])


async def kinds(rt: stead.Runtime, run_id: str) -> list[str]:
    return [e.event.kind for e in await rt.store.read_events(run_id)]


async def test_turns_and_calls_are_the_runs(server: WireServer, tmp_path: Path) -> None:
    agent = make_agent(server.url)
    keys: list[str] = []

    @agent.tool_plain(metadata={"stead": {"effect": "idempotent_write"}})
    def save_note(text: str) -> str:
        """Save a note."""
        keys.append(tool_context().idempotency_key)
        return f"saved {text}"

    server.push(calls(("toolu_1", "save_note", '{"text": "hi"}')), anthropic_stream("Saved."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Save hi")
        view = await rt.run(run_id)
        assert view.status is RunStatus.COMPLETED
        assert view.output == "Saved."
        assert view.turns == 2
        assert view.usage.input_tokens == 50 and view.usage.output_tokens == 30
        log = await rt.store.read_events(run_id)
    requested = [e.event for e in log if e.event.kind == "tool_call_requested"]
    assert [(r.name, r.effect_class, r.arguments) for r in requested] == [  # type: ignore[attr-defined]
        ("save_note", "idempotent_write", '{"text":"hi"}')
    ]
    assert keys == [requested[0].idempotency_key]  # type: ignore[attr-defined]
    # Intent before the call, result after it: the log's own order.
    order = [e.event.kind for e in log]
    assert order.index("tool_call_requested") < order.index("tool_result_recorded")


async def test_approval_pauses_and_the_same_run_goes_on(server: WireServer, tmp_path: Path) -> None:
    agent = make_agent(server.url)
    refunds: list[int] = []

    @agent.tool_plain(requires_approval=True, metadata={"stead": {"effect": "non_idempotent"}})
    def refund(cents: int) -> str:
        """Refund an order."""
        refunds.append(cents)
        return f"refunded {cents}"

    server.push(calls(("toolu_1", "refund", '{"cents": 5000}')), anthropic_stream("Refunded."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Refund order 42")
        view = await rt.run(run_id)
        assert view.status is RunStatus.AWAITING_APPROVAL
        assert [a.tool for a in view.approvals] == ["refund"]
        assert refunds == []
        await rt.approve(run_id, "toolu_1", token=view.approvals[0].token)
        view = await rt.run(run_id)
    assert view.status is RunStatus.COMPLETED
    assert view.run_id == run_id and view.output == "Refunded."
    assert refunds == [5000]
    assert len(server.requests) == 2


async def test_a_denied_call_never_runs_and_the_model_reads_why(
    server: WireServer, tmp_path: Path
) -> None:
    agent = make_agent(server.url)
    refunds: list[int] = []

    @agent.tool_plain(requires_approval=True)
    def refund(cents: int) -> str:
        """Refund an order."""
        refunds.append(cents)
        return "refunded"

    server.push(calls(("toolu_1", "refund", '{"cents": 90000}')), anthropic_stream("Not refunded."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Refund order 42")
        view = await rt.run(run_id)
        await rt.deny(run_id, "toolu_1", "too large", token=view.approvals[0].token)
        view = await rt.run(run_id)
    assert view.status is RunStatus.COMPLETED
    assert refunds == []
    sent = str(server.requests[1].body["messages"])
    assert "too large" in sent


class Answer(BaseModel):
    city: str
    population: int


async def test_typed_output_and_a_model_retry(server: WireServer, tmp_path: Path) -> None:
    agent = make_agent(server.url, output_type=Answer)
    asked: list[str] = []

    @agent.tool_plain(metadata={"stead": {"effect": "read_only"}})
    def population(city: str) -> int:
        """Population of a city."""
        asked.append(city)
        if city != "Paris":
            raise ModelRetry("only Paris is known; ask for Paris")
        return 2_100_000

    server.push(
        calls(("toolu_1", "population", '{"city": "Lyon"}')),
        calls(("toolu_2", "population", '{"city": "Paris"}')),
        calls(("toolu_3", "final_result", '{"city": "Paris", "population": 2100000}')),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "How many live in Paris?")
        view = await rt.run(run_id)
        log = await rt.store.read_events(run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.data == Answer(city="Paris", population=2_100_000)
    results = [e.event for e in log if e.event.kind == "tool_result_recorded"]
    first = results[0]
    assert first.is_error and "only Paris is known" in first.content  # type: ignore[attr-defined]
    assert "only Paris is known" in str(server.requests[1].body["messages"])
    assert asked == ["Lyon", "Paris"]


async def test_streamed_text_reaches_live_progress(server: WireServer, tmp_path: Path) -> None:
    agent = make_agent(server.url)
    seen: list[str] = []
    server.push(anthropic_stream("Hel", "lo, ", "Ada."))
    async with stead.Runtime(
        f"sqlite:///{tmp_path / 'r.db'}",
        agents=[agent],
        on_progress=lambda frame: seen.append(frame.text),
    ) as rt:
        view = await rt.run(await rt.start(agent, "Greet Ada"))
    assert view.output == "Hello, Ada."
    assert "".join(seen) == "Hello, Ada."
    assert len(seen) >= 3  # as it streamed, not one block at the end


async def test_a_conversation_gives_the_agent_its_earlier_messages(
    server: WireServer, tmp_path: Path
) -> None:
    agent = make_agent(server.url)
    server.push(anthropic_stream("Hello Ada."), anthropic_stream("You are Ada."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        first = await rt.send("conv_1", "I am Ada.", agent=agent)
        second = await rt.send("conv_1", "Who am I?")
    assert first.output == "Hello Ada." and second.output == "You are Ada."
    sent = server.requests[1].body["messages"]
    assert "I am Ada." in str(sent) and "Hello Ada." in str(sent) and "Who am I?" in str(sent)


async def test_cancel_aborts_the_tool_and_leaves_a_valid_history(
    server: WireServer, tmp_path: Path
) -> None:
    agent = make_agent(server.url)
    started = asyncio.Event()
    stopped: list[bool] = []

    @agent.tool_plain(metadata={"stead": {"effect": "read_only"}})
    async def wait_for_parcel() -> str:
        """Wait for a parcel."""
        started.set()
        await tool_context().signal.wait()
        stopped.append(True)
        return "stopped"

    server.push(calls(("toolu_1", "wait_for_parcel", "{}")))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Wait")
        drive = asyncio.ensure_future(rt.run(run_id))
        await asyncio.wait_for(started.wait(), 30)
        await rt.cancel(run_id, "user left")
        view = await asyncio.wait_for(drive, 30)
        log = await rt.store.read_events(run_id)
    assert view.status is RunStatus.CANCELLED
    assert stopped == [True]
    results = [e.event for e in log if e.event.kind == "tool_result_recorded"]
    assert len(results) == 1  # every call has exactly one result


class AskFirst(AbstractCapability[Any]):
    """Defers every refund to a person from a hook: an approval stead was not told about."""

    async def before_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        if call.tool_name == "refund":
            raise ApprovalRequired()
        return args


async def test_an_approval_the_tool_does_not_declare_fails_the_run_saying_so(
    server: WireServer, tmp_path: Path
) -> None:
    agent = make_agent(server.url, capabilities=[AskFirst()])
    refunds: list[int] = []

    @agent.tool_plain
    def refund(cents: int) -> str:
        """Refund an order."""
        refunds.append(cents)
        return "refunded"

    server.push(calls(("toolu_1", "refund", '{"cents": 5000}')))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "Refund order 42"))
    assert view.status is RunStatus.FAILED
    assert "give the tool requires_approval=True" in str(view.error)
    assert refunds == []
