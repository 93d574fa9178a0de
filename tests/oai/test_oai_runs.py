"""An Agents SDK agent handed to stead with ``durable``, driven in this process on the SDK's
own ``OpenAIChatCompletionsModel`` against the wire server: its model requests are the run's
model turns, its tool calls the run's tool calls, with stead's states, approvals, streaming
progress, cancel, and a replay of other code refused."""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import asyncio
from pathlib import Path
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from openai import AsyncOpenAI
from wire_server import WireServer
from wire_shapes import openai_stream

import stead
import stead.openai_agents as sa
from stead.core.states import RunStatus
from stead.errors import ReplayDiverged, UserError

set_tracing_disabled(True)


@pytest.fixture
def server() -> Any:
    with WireServer() as srv:
        yield srv


@pytest.fixture
async def llm(server: WireServer) -> Any:
    """The SDK's own model on the official client, pointed at the wire server (its
    connections closed at the end, as an application closes its client)."""
    client = AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0)
    yield OpenAIChatCompletionsModel("gpt-4.1", openai_client=client)
    await client.close()


def calls(*specs: tuple[str, str, str]) -> Any:
    return openai_stream(tools=[(cid, name, [args]) for cid, name, args in specs])


async def test_turns_and_parallel_calls_are_the_runs(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    ran: list[str] = []
    keys: list[str] = []

    @sa.effect("idempotent_write")
    @function_tool
    async def save_note(text: str) -> str:
        """Save a note."""
        # The second call finishes first: the log's order is the reply's, not the finish's.
        await asyncio.sleep(0.2 if text == "a" else 0)
        ran.append(text)
        keys.append(sa.tool_context().idempotency_key)
        return f"saved {text}"

    agent = sa.durable(Agent(name="notes", model=llm, tools=[save_note]))
    server.push(
        calls(("call_a", "save_note", '{"text": "a"}'), ("call_b", "save_note", '{"text": "b"}')),
        openai_stream("Saved both."),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Save a and b")
        view = await rt.run(run_id)
        log = await rt.store.read_events(run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "Saved both."
    assert view.turns == 2
    assert view.usage.output_tokens == 24  # both replies' usage, counted into the run's
    requested = [e.event for e in log if e.event.kind == "tool_call_requested"]
    assert [(r.tool_call_id, r.effect_class) for r in requested] == [  # type: ignore[attr-defined]
        ("call_a", "idempotent_write"),
        ("call_b", "idempotent_write"),
    ]
    assert sorted(ran) == ["a", "b"]
    assert set(keys) == {r.idempotency_key for r in requested}  # type: ignore[attr-defined]
    order = [e.event.kind for e in log]
    last_intent = max(i for i, k in enumerate(order) if k == "tool_call_requested")
    first_result = order.index("tool_result_recorded")
    assert last_intent < first_result  # every intent before any result
    sent = {
        m["tool_call_id"]: m["content"]
        for m in server.requests[1].body["messages"]
        if m.get("role") == "tool"
    }
    assert sent == {"call_a": "saved a", "call_b": "saved b"}


async def test_needs_approval_pauses_and_the_same_run_goes_on(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    refunds: list[int] = []

    @function_tool(needs_approval=True)
    def refund(cents: int) -> str:
        """Refund an order."""
        refunds.append(cents)
        return f"refunded {cents}"

    agent = sa.durable(Agent(name="refunds", model=llm, tools=[refund]))
    server.push(calls(("call_1", "refund", '{"cents": 5000}')), openai_stream("Refunded."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Refund order 42")
        view = await rt.run(run_id)
        assert view.status is RunStatus.AWAITING_APPROVAL
        assert [a.tool for a in view.approvals] == ["refund"]
        assert refunds == []
        await rt.approve(run_id, "call_1", token=view.approvals[0].token)
        view = await rt.run(run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.run_id == run_id and view.output == "Refunded."
    assert refunds == [5000]
    assert len(server.requests) == 2


async def test_a_denied_call_never_runs_and_the_model_reads_why(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    refunds: list[int] = []

    @function_tool(needs_approval=True)
    def refund(cents: int) -> str:
        """Refund an order."""
        refunds.append(cents)
        return "refunded"

    agent = sa.durable(Agent(name="refunds", model=llm, tools=[refund]))
    server.push(calls(("call_1", "refund", '{"cents": 90000}')), openai_stream("Not refunded."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Refund order 42")
        view = await rt.run(run_id)
        await rt.deny(run_id, "call_1", "too large", token=view.approvals[0].token)
        view = await rt.run(run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert refunds == []
    assert "too large" in str(server.requests[1].body["messages"])


async def test_streamed_text_reaches_live_progress(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    agent = sa.durable(Agent(name="greeter", model=llm))
    seen: list[str] = []
    server.push(openai_stream("Hel", "lo, ", "Ada."))
    async with stead.Runtime(
        f"sqlite:///{tmp_path / 'r.db'}",
        agents=[agent],
        on_progress=lambda frame: seen.append(frame.text),
    ) as rt:
        view = await rt.run(await rt.start(agent, "Greet Ada"))
    assert view.output == "Hello, Ada."
    assert "".join(seen) == "Hello, Ada."
    assert len(seen) >= 3  # as it streamed, not one block at the end


async def test_cancel_aborts_the_tool_and_leaves_a_valid_history(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    started = asyncio.Event()
    stopped: list[bool] = []

    @sa.effect("read_only")
    @function_tool
    async def wait_for_parcel() -> str:
        """Wait for a parcel."""
        started.set()
        await sa.tool_context().signal.wait()
        stopped.append(True)
        return "stopped"

    agent = sa.durable(Agent(name="waiter", model=llm, tools=[wait_for_parcel]))
    server.push(calls(("call_1", "wait_for_parcel", "{}")))
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


async def test_a_replay_by_other_code_is_refused(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    refunds: list[int] = []

    @function_tool(needs_approval=True)
    def refund(cents: int) -> str:
        """Refund an order."""
        refunds.append(cents)
        return "refunded"

    def build(**options: Any) -> stead.Agent:
        return sa.durable(Agent(name="refunds", model=llm, tools=[refund], **options))

    store = f"sqlite:///{tmp_path / 'r.db'}"
    server.push(calls(("call_1", "refund", '{"cents": 5000}')), openai_stream("Refunded."))
    first = build()
    async with stead.Runtime(store, agents=[first]) as rt:
        run_id = await rt.start(first, "Refund order 42")
        view = await rt.run(run_id)
        assert view.status is RunStatus.AWAITING_APPROVAL
    # Changed code: the agent now stops at its first tool's output, where the run asked the
    # model again; the log's next model turn is never asked for.
    changed = build(tool_use_behavior="stop_on_first_tool")
    async with stead.Runtime(store, agents=[changed]) as rt:
        await rt.approve(run_id, "call_1", token=view.approvals[0].token)
        with pytest.raises(ReplayDiverged, match="no longer makes the requests"):
            await rt.resume(run_id)
        kinds = [e.event.kind for e in await rt.store.read_events(run_id)]
    assert "step_failed" in kinds


def test_settings_name_a_tool_of_the_agent(llm: Any) -> None:
    @function_tool
    def ping() -> str:
        """Ping."""
        return "pong"

    sdk = Agent(name="pinger", model=llm, tools=[ping])
    with pytest.raises(UserError, match=r"names no tool of the agent"):
        sa.durable(sdk, tools={"pong": {"effect": "read_only"}})
    with pytest.raises(UserError, match="give it a model object"):
        sa.durable(Agent(name="pinger", model="gpt-4.1"))


async def test_a_run_longer_than_the_sdks_turn_cap_is_bounded_by_steads_limits(
    tmp_path: Path,
) -> None:
    from agents.testing import ScriptedModel, assistant_message, function_call

    @sa.effect("read_only")
    @function_tool
    def step(n: int) -> str:
        """Take a step."""
        return f"step {n}"

    turns = 12  # past the SDK's own default cap of 10 turns a Runner.run
    script = [[function_call("step", {"n": i}, call_id=f"call_{i}")] for i in range(turns)]
    model = ScriptedModel([*script, [assistant_message("walked")]])
    agent = sa.durable(Agent(name="walker", model=model, tools=[step]))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "Walk"))
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "walked" and view.turns == turns + 1

    capped = sa.durable(
        Agent(name="walker2", model=ScriptedModel(script), tools=[step]),
        limits=stead.Limits(max_turns=3),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r2.db'}", agents=[capped]) as rt:
        view = await rt.run(await rt.start(capped, "Walk"))
    # stead's limit ends it, as it ends a native text agent's run: completed at max_turns.
    assert view.status is RunStatus.COMPLETED
    assert view.stop_reason == "max_turns" and view.turns == 3
