"""A ``create_agent`` agent with ``SteadMiddleware``, driven in this process on LangChain's
own ``ChatOpenAI`` against the wire server: its model calls are the run's model turns, its
tool calls the run's tool calls, with approvals, cancel, and a replay of other code refused."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from wire_server import WireServer
from wire_shapes import openai_stream

import stead
import stead.langchain as sl
from stead.core.states import RunStatus
from stead.errors import ReplayDiverged, UserError


@pytest.fixture
def server() -> Any:
    with WireServer() as srv:
        yield srv


def calls(*specs: tuple[str, str, str]) -> Any:
    return openai_stream(tools=[(cid, name, [args]) for cid, name, args in specs])


def build(
    url: str, name: str, tools: list[BaseTool], middleware: tuple[Any, ...] = ()
) -> stead.Agent:
    model = ChatOpenAI(
        model="gpt-4.1", api_key="sk-test", base_url=url + "/v1", streaming=True, max_retries=0
    )
    graph = create_agent(model, tools, name=name, middleware=[*middleware, sl.SteadMiddleware()])
    return sl.durable(graph)


async def test_turns_and_parallel_calls_are_the_runs(server: WireServer, tmp_path: Path) -> None:
    keys: list[str] = []

    @sl.effect("idempotent_write")
    @tool
    async def save_note(text: str) -> str:
        """Save a note."""
        await asyncio.sleep(0.2 if text == "a" else 0)  # the second call finishes first
        keys.append(sl.tool_context().idempotency_key)
        return f"saved {text}"

    agent = build(server.url, "notes", [save_note])
    server.push(
        calls(("call_a", "save_note", '{"text": "a"}'), ("call_b", "save_note", '{"text": "b"}')),
        openai_stream("Saved both."),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Save a and b")
        view = await rt.run(run_id)
        log = await rt.store.read_events(run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "Saved both." and view.turns == 2
    requested = [e.event for e in log if e.event.kind == "tool_call_requested"]
    assert [(r.tool_call_id, r.effect_class) for r in requested] == [  # type: ignore[attr-defined]
        ("call_a", "idempotent_write"),
        ("call_b", "idempotent_write"),
    ]
    assert set(keys) == {r.idempotency_key for r in requested}  # type: ignore[attr-defined]
    order = [e.event.kind for e in log]
    last_intent = max(i for i, k in enumerate(order) if k == "tool_call_requested")
    assert last_intent < order.index("tool_result_recorded")
    sent = {
        m["tool_call_id"]: m["content"]
        for m in server.requests[1].body["messages"]
        if m.get("role") == "tool"
    }
    assert sent == {"call_a": "saved a", "call_b": "saved b"}


def refund_tool(refunds: list[int]) -> BaseTool:
    @sl.effect("non_idempotent", requires_approval=True)
    @tool
    def refund(cents: int) -> str:
        """Refund an order."""
        refunds.append(cents)
        return f"refunded {cents}"

    return refund


async def test_approval_pauses_and_the_same_run_goes_on(server: WireServer, tmp_path: Path) -> None:
    refunds: list[int] = []
    agent = build(server.url, "refunds", [refund_tool(refunds)])
    server.push(calls(("call_1", "refund", '{"cents": 5000}')), openai_stream("Refunded."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Refund order 42")
        view = await rt.run(run_id)
        assert view.status is RunStatus.AWAITING_APPROVAL
        assert refunds == []
        await rt.approve(run_id, "call_1", token=view.approvals[0].token)
        view = await rt.run(run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.run_id == run_id and view.output == "Refunded."
    assert refunds == [5000]


async def test_cancel_aborts_the_tool_and_leaves_a_valid_history(
    server: WireServer, tmp_path: Path
) -> None:
    started = asyncio.Event()
    stopped: list[bool] = []

    @sl.effect("read_only")
    @tool
    async def wait_for_parcel() -> str:
        """Wait for a parcel."""
        started.set()
        await sl.tool_context().signal.wait()
        stopped.append(True)
        return "stopped"

    agent = build(server.url, "waiter", [wait_for_parcel])
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
    assert len([e for e in log if e.event.kind == "tool_result_recorded"]) == 1


class Redirect(AgentMiddleware):  # type: ignore[type-arg]
    """A change of code after the pause: every refund is now ten times larger."""

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        args = request.tool_call["args"]
        call = {**request.tool_call, "args": {**args, "cents": args["cents"] * 10}}
        return await handler(request.override(tool_call=call))


async def test_a_replay_with_other_arguments_is_refused(server: WireServer, tmp_path: Path) -> None:
    refunds: list[int] = []
    store = f"sqlite:///{tmp_path / 'r.db'}"
    server.push(calls(("call_1", "refund", '{"cents": 5000}')))
    first = build(server.url, "refunds", [refund_tool(refunds)])
    async with stead.Runtime(store, agents=[first]) as rt:
        run_id = await rt.start(first, "Refund order 42")
        view = await rt.run(run_id)
        assert view.status is RunStatus.AWAITING_APPROVAL
    changed = build(server.url, "refunds", [refund_tool(refunds)], middleware=(Redirect(),))
    async with stead.Runtime(store, agents=[changed]) as rt:
        await rt.approve(run_id, "call_1", token=view.approvals[0].token)
        with pytest.raises(ReplayDiverged, match=r"call call_1 of 'refund'"):
            await rt.resume(run_id)
    assert refunds == []  # its recorded approval is never given to another call


def test_an_agent_without_the_middleware_or_a_name_is_refused(server: WireServer) -> None:
    model = ChatOpenAI(model="gpt-4.1", api_key="sk-test", base_url=server.url + "/v1")
    with pytest.raises(UserError, match="needs a name"):
        sl.durable(create_agent(model, [], middleware=[sl.SteadMiddleware()]))

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    ping.metadata = {"stead": {"efect": "read_only"}}
    with pytest.raises(UserError, match="'efect'"):
        sl.durable(create_agent(model, [ping], name="pinger"))


async def test_an_agent_built_without_the_middleware_fails_saying_so(
    server: WireServer, tmp_path: Path
) -> None:
    model = ChatOpenAI(
        model="gpt-4.1", api_key="sk-test", base_url=server.url + "/v1", streaming=True
    )
    agent = sl.durable(create_agent(model, [], name="bare"))
    server.push(openai_stream("Hello."))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "Hi"))
    assert view.status is RunStatus.FAILED
    assert "middleware=[stead.langchain.SteadMiddleware()]" in str(view.error)
