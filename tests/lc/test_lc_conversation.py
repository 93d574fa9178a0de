"""A LangChain agent's conversation: a follow-up sent with ``rt.send`` is a new run whose
graph is given the earlier exchange (read from the log, tool calls and results included)
before the new message."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

from pathlib import Path

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from wire_server import WireServer
from wire_shapes import openai_stream

import stead
import stead.langchain as sl


@sl.effect("read_only")
@tool
def find_order(number: int) -> str:
    """Find an order."""
    return f"order {number}: shipped"


async def test_a_follow_up_reads_the_earlier_exchange(tmp_path: Path) -> None:
    with WireServer() as server:
        model = ChatOpenAI(
            model="gpt-4.1",
            api_key="sk-test",
            base_url=server.url + "/v1",
            streaming=True,
            max_retries=0,
        )
        graph = create_agent(model, [find_order], name="orders", middleware=[sl.SteadMiddleware()])
        agent = sl.durable(graph)
        server.push(
            openai_stream(tools=[("call_1", "find_order", ['{"number": 42}'])]),
            openai_stream("Order 42 has shipped."),
            openai_stream("It was order 42."),
        )
        async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
            first = await rt.send("ada", "Where is order 42?", agent=agent)
            again = await rt.send("ada", "Which order was it?")
    assert first.status.value == "completed", first.error
    assert (first.output, again.output) == ("Order 42 has shipped.", "It was order 42.")
    sent = server.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[0]["content"] == "Where is order 42?"
    assert sent[1]["tool_calls"][0]["id"] == "call_1"
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "order 42: shipped"}
    assert sent[-1]["content"] == "Which order was it?"
