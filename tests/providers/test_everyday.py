"""Structured output, deps and model settings through the official SDKs, against the local
Anthropic and OpenAI wire servers: what each SDK really sends, and whole runs.

Per provider: the settings as the API spells them (Anthropic ``stop_sequences`` and a
``tool_choice`` block carrying ``disable_parallel_tool_use``; OpenAI ``stop``,
``tool_choice`` strings and ``parallel_tool_calls``; extras in the body); a structured answer
asked for as the ``final_result`` tool, refused with its errors as an error tool result, then
accepted; a tool reading ``ctx.deps``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from test_runs import model_for, stream
from wire_server import WireServer

import stead
from stead.core.states import RunStatus

KINDS = ["anthropic", "openai"]


class Order(BaseModel):
    """An order's state."""

    order_id: int
    status: str


@dataclass
class Shop:
    """The worker's live object: what the tool reads through ``ctx.deps``."""

    orders: dict[int, str]


@stead.tool(effect="read_only")
def lookup(order_id: int, ctx: stead.ToolContext[Shop]) -> str:
    """Look an order up."""
    return ctx.deps.orders[order_id]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


async def _run(store: str, agent: stead.Agent, **kw: Any) -> stead.RunView:
    async with stead.Runtime(store, agents=[agent], deps=Shop({42: "shipped"})) as rt:
        rid = await rt.start(agent, "Where is order 42?", **kw)
        return await rt.run(rid)


SETTINGS = stead.ModelSettings(
    temperature=0.3,
    top_p=0.9,
    max_output_tokens=512,
    stop_sequences=["STOP"],
    tool_choice="required",
    parallel_tool_calls=False,
)


@pytest.mark.parametrize("kind", KINDS)
async def test_settings_are_sent_as_each_api_spells_them(
    kind: str, server: WireServer, store: str
) -> None:
    server.push(stream(kind, "Shipped."))
    extra = {"top_k": 5} if kind == "anthropic" else {"seed": 7}
    agent = stead.Agent("s", model_for(kind, server), [lookup], deps_type=Shop, settings=SETTINGS)
    view = await _run(store, agent, settings=stead.ModelSettings(temperature=0.1, extra=extra))
    assert view.status is RunStatus.COMPLETED
    body = server.requests[0].body
    assert body["temperature"] == 0.1  # the run's own wins over the agent's
    assert body["top_p"] == 0.9
    if kind == "anthropic":
        assert body["max_tokens"] == 512
        assert body["stop_sequences"] == ["STOP"]
        assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
        assert body["top_k"] == 5  # an extra, in the body as given
    else:
        assert body["max_completion_tokens"] == 512
        assert body["stop"] == ["STOP"]
        assert body["tool_choice"] == "required"
        assert body["parallel_tool_calls"] is False
        assert body["seed"] == 7


@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_name_as_tool_choice_and_no_tool_settings_without_tools(
    kind: str, server: WireServer, store: str
) -> None:
    server.push(stream(kind, "a"), stream(kind, "b"))
    named = stead.ModelSettings(tool_choice="lookup")
    agent = stead.Agent("n", model_for(kind, server), [lookup], deps_type=Shop, settings=named)
    await _run(store, agent)
    body = server.requests[0].body
    if kind == "anthropic":
        assert body["tool_choice"] == {"type": "tool", "name": "lookup"}
    else:
        assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    bare = stead.Agent("bare", model_for(kind, server), settings=SETTINGS)
    await _run(store, bare)
    body = server.requests[1].body
    assert "tool_choice" not in body and "parallel_tool_calls" not in body  # APIs refuse them
    assert body["temperature"] == 0.3


@pytest.mark.parametrize("kind", KINDS)
async def test_a_structured_answer_is_refused_with_its_errors_then_accepted(
    kind: str, server: WireServer, store: str
) -> None:
    server.push(
        stream(kind, tools=[("call_1", "lookup", ['{"order_id": 42}'])]),
        stream(kind, tools=[("call_2", "final_result", ['{"order_id": "forty-two"}'])]),
        stream(kind, tools=[("call_3", "final_result", ['{"order_id": 42, "status": "shipped"}'])]),
    )
    agent = stead.Agent("o", model_for(kind, server), [lookup], deps_type=Shop, output_type=Order)
    view = await _run(store, agent)

    assert view.status is RunStatus.COMPLETED, view.error
    assert view.data == Order(order_id=42, status="shipped")
    first = server.requests[0].body
    if kind == "anthropic":
        (final,) = [t for t in first["tools"] if t["name"] == "final_result"]
        assert final["input_schema"]["required"] == ["order_id", "status"]
        results = [
            b
            for m in server.requests[2].body["messages"]
            if m["role"] == "user"
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        refused = next(b for b in results if b["tool_use_id"] == "call_2")
        assert refused["is_error"] is True
        assert results[0]["content"] == "shipped"  # ctx.deps reached the tool
    else:
        (final,) = [t for t in first["tools"] if t["function"]["name"] == "final_result"]
        assert final["function"]["parameters"]["required"] == ["order_id", "status"]
        tools = [m for m in server.requests[2].body["messages"] if m["role"] == "tool"]
        refused = next(m for m in tools if m["tool_call_id"] == "call_2")
        refused["content"] = refused["content"].removeprefix("ERROR: ")
        assert tools[0]["content"] == "shipped"
    assert "order_id: Input should be a valid integer" in refused["content"]
