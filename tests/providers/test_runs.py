"""Whole runs through ``stead.Runtime`` on each real provider, against the local wire server.

Per provider: a multi-turn run with parallel tool calls and a failing tool; a stream cut in
the middle of a reply (retried under a new progress generation, one durable message, no
duplicated text); ``retry-after`` honoured by the backoff; a non-retryable code ending the
run after one attempt.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from wire_server import Reply, WireServer
from wire_shapes import anthropic_error, anthropic_stream, openai_error, openai_stream

import stead
from stead.core.events import AssistantMessageRecorded, ModelCallFailed
from stead.core.messages import AssistantMessage, Usage
from stead.core.pricing import PRICES
from stead.core.progress import ProgressFrame
from stead.core.states import RunStatus
from stead.providers import ModelProvider, model_from_string
from stead.providers.anthropic import AnthropicModel
from stead.providers.openai import OpenAIModel
from stead.runtime import Backoff
from stead.testing import assert_valid_history

KINDS = ["anthropic", "openai", "openai-compatible"]
FAST = Backoff(base=0.001, cap=0.001)
SENT: list[tuple[str, str]] = []


@stead.tool(effect="read_only")
def lookup_order(order_id: int) -> dict[str, Any]:
    """Look up an order by id."""
    if order_id != 42:
        raise KeyError(f"no order {order_id}")
    return {"order_id": 42, "status": "shipped"}


@stead.tool(effect="idempotent_write")
def notify(to: str, text: str) -> str:
    """Send a note to someone."""
    SENT.append((to, text))
    return "sent"


def model_for(kind: str, server: WireServer) -> ModelProvider:
    if kind == "anthropic":
        return AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url)
    if kind == "openai":
        return OpenAIModel("gpt-4.1", api_key="sk-test", base_url=server.url + "/v1")
    return model_from_string(f"openai-compatible:{server.url}/v1:qwen3")


NO_USAGE = Usage()


def stream(kind: str, *text: str, tools: Any = (), usage: Usage = NO_USAGE, **kw: Any) -> Reply:
    if kind == "anthropic":
        return anthropic_stream(
            *text,
            tools=tools,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read=usage.cache_read_input_tokens,
            cache_creation=usage.cache_creation_input_tokens,
            **kw,
        )
    return openai_stream(
        *text,
        tools=tools,
        prompt_tokens=usage.input_tokens + usage.cache_read_input_tokens,
        cached_tokens=usage.cache_read_input_tokens,
        completion_tokens=usage.output_tokens,
        model="gpt-4.1-2025-04-14" if kind == "openai" else "qwen3",
        **kw,
    )


def agent_for(kind: str, server: WireServer) -> stead.Agent:
    return stead.Agent(
        f"shop-{kind}",
        model_for(kind, server),
        [lookup_order, notify],
        system="You help the support team.",
    )


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def _assistants(state: Any) -> list[AssistantMessage]:
    return [m for m in state.messages if isinstance(m, AssistantMessage)]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_multi_turn_tool_run(kind: str, server: WireServer, store: str) -> None:
    SENT.clear()
    u0 = Usage(input_tokens=500, output_tokens=60, cache_creation_input_tokens=0)
    u1 = Usage(input_tokens=40, output_tokens=30, cache_read_input_tokens=1100)
    u2 = Usage(input_tokens=20, output_tokens=15, cache_read_input_tokens=1200)
    server.push(
        stream(
            kind,
            "Looking both ",
            "up.",
            tools=[
                ("call_a1", "lookup_order", ['{"order_id"', ": 42}"]),
                ("call_b2", "lookup_order", ['{"order_id": 7}']),
            ],
            usage=u0,
        ),
        stream(
            kind,
            tools=[("call_c3", "notify", ['{"to": "on-call", "text": "42 shipped"}'])],
            usage=u1,
        ),
        stream(kind, "Order 42 has shipped; ", "order 7 does not exist.", usage=u2),
    )
    agent = agent_for(kind, server)
    frames: list[ProgressFrame] = []
    async with stead.Runtime(store, agents=[agent], on_progress=frames.append) as rt:
        rid = await rt.start(agent, "Where are orders 42 and 7? Tell on-call.")
        view = await rt.run(rid)
        state = await rt.state(rid)

    assert view.status is RunStatus.COMPLETED
    assert view.output == "Order 42 has shipped; order 7 does not exist."
    assert SENT == [("on-call", "42 shipped")]
    assert_valid_history(state)
    results = {c.tool_call_id: c.result for c in state.calls.values()}
    assert results == {}  # the last turn asked for no tools
    assert view.usage == u0 + u1 + u2
    if kind != "openai-compatible":
        assert PRICES.cost(view.usage, agent.model.model_name) is not None

    # progress: one generation per model call, the durable texts are what streamed
    by_gen: dict[int, str] = {}
    for f in frames:
        by_gen[f.generation] = by_gen.get(f.generation, "") + f.text
    assert by_gen == {1: "Looking both up.", 3: "Order 42 has shipped; order 7 does not exist."}
    assert [m.text for m in _assistants(state)] == [by_gen[1], "", by_gen[3]]

    # what the provider was sent on turn 1: both results, the failed one marked as an error
    assert len(server.requests) == 3
    second = server.requests[1].body
    if kind == "anthropic":
        results_turn = second["messages"][2]["content"]
        assert [b["type"] for b in results_turn] == ["tool_result", "tool_result"]
        assert [b["tool_use_id"] for b in results_turn] == ["call_a1", "call_b2"]
        assert "is_error" not in results_turn[0] and results_turn[1]["is_error"] is True
        assert "no order 7" in results_turn[1]["content"]
        assert second["messages"][1]["content"][1]["input"] == {"order_id": 42}
        assert results_turn[-1]["cache_control"] == {"type": "ephemeral"}
        third = server.requests[2].body["messages"]
        assert third[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}  # read back
    else:
        tools = [m for m in second["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tools] == ["call_a1", "call_b2"]
        assert not tools[0]["content"].startswith("ERROR: ")
        assert tools[1]["content"].startswith("ERROR: ") and "no order 7" in tools[1]["content"]
        calls = second["messages"][2]["tool_calls"]
        assert [c["function"]["arguments"] for c in calls] == [
            '{"order_id": 42}',
            '{"order_id": 7}',
        ]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_cut_mid_reply_is_retried_under_a_new_generation(
    kind: str, server: WireServer, store: str
) -> None:
    text = ("Order ", "42 ", "has ", "shipped.")
    cut_at = 5 if kind == "anthropic" else 3  # after "Order " and "42 " went out
    server.push(
        stream(kind, *text, usage=Usage(input_tokens=300, output_tokens=9), cut_after=cut_at),
        stream(kind, *text, usage=Usage(input_tokens=300, output_tokens=20)),
    )
    agent = agent_for(kind, server)
    frames: list[ProgressFrame] = []
    async with stead.Runtime(store, agents=[agent], on_progress=frames.append, backoff=FAST) as rt:
        rid = await rt.start(agent, "Where is order 42?")
        view = await rt.run(rid)
        events = [e.event for e in await rt.events(rid)]
        state = await rt.state(rid)

    assert view.status is RunStatus.COMPLETED
    failed = [e for e in events if isinstance(e, ModelCallFailed)]
    assert [(e.turn_index, e.attempt, e.code) for e in failed] == [(0, 1, "connection_failed")]
    replies = [e for e in events if isinstance(e, AssistantMessageRecorded)]
    assert len(replies) == 1 and replies[0].message.text == "Order 42 has shipped."
    assert [m.text for m in _assistants(state)] == ["Order 42 has shipped."]
    assert [(f.generation, f.sequence, f.text) for f in frames] == [
        (1, 0, "Order "),
        (1, 1, "42 "),
        (2, 0, "Order "),
        (2, 1, "42 "),
        (2, 2, "has "),
        (2, 3, "shipped."),
    ]
    window = rt.progress.read(rid)
    assert window.cursor.generation == 2 and "".join(f.text for f in window.frames) == view.output
    # every attempt counts: the cut one had read its prompt (Anthropic says so up front)
    if kind == "anthropic":
        assert failed[0].usage == Usage(input_tokens=300, output_tokens=1)
        assert view.usage == Usage(input_tokens=600, output_tokens=21)
    else:
        assert failed[0].usage is None
        assert view.usage == Usage(input_tokens=300, output_tokens=20)


def _recording_backoff(chosen: list[tuple[int, float | None, float]]) -> Backoff:
    class Recording(Backoff):
        def delay(self, attempt: int, retry_after: float | None, rand: random.Random) -> float:
            value = super().delay(attempt, retry_after, rand)
            chosen.append((attempt, retry_after, value))
            return value

    return Recording(base=0.001, cap=0.001)


@pytest.mark.parametrize("kind", KINDS)
async def test_retry_after_from_the_response_sets_the_delay(
    kind: str, server: WireServer, store: str
) -> None:
    if kind == "anthropic":
        refused = anthropic_error(429, "rate_limit_error", "slow down", retry_after="0.25")
    else:
        refused = openai_error(429, "Rate limit reached", "tokens", "rate_limit_exceeded")
        refused.headers["retry-after-ms"] = "250"
    server.push(refused, stream(kind, "Fine."))
    chosen: list[tuple[int, float | None, float]] = []
    agent = agent_for(kind, server)
    async with stead.Runtime(store, agents=[agent], backoff=_recording_backoff(chosen)) as rt:
        rid = await rt.start(agent, "Hello")
        view = await rt.run(rid)
        events = [e.event for e in await rt.events(rid)]

    assert view.status is RunStatus.COMPLETED and view.output == "Fine."
    # jitter is at most 1 ms here, so the wait the loop chose is the header's, exactly
    assert chosen == [(1, 0.25, 0.25)]
    assert [(e.code, e.attempt) for e in events if isinstance(e, ModelCallFailed)] == [
        ("rate_limited", 1)
    ]
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
async def test_a_non_retryable_code_fails_the_run_after_one_attempt(
    kind: str, server: WireServer, store: str
) -> None:
    if kind == "anthropic":
        server.push(anthropic_error(401, "authentication_error", "invalid x-api-key"))
    else:
        server.push(
            openai_error(401, "Incorrect API key", "invalid_request_error", "invalid_api_key")
        )
    agent = agent_for(kind, server)
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "Hello")
        view = await rt.run(rid)
    assert view.status is RunStatus.FAILED
    assert view.error is not None and view.error["code"] == "authentication_failed"
    assert len(server.requests) == 1


async def test_retries_are_bounded(server: WireServer, store: str) -> None:
    server.push(*[anthropic_error(529, "overloaded_error", "Overloaded") for _ in range(10)])
    agent = stead.Agent(
        "bounded",
        model_for("anthropic", server),
        limits=stead.Limits(max_model_attempts=3),
    )
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "Hello")
        view = await rt.run(rid)
        events = [e.event for e in await rt.events(rid)]
    assert view.status is RunStatus.FAILED
    assert view.error is not None and view.error["code"] == "provider_unavailable"
    assert [e.attempt for e in events if isinstance(e, ModelCallFailed)] == [1, 2, 3]
    assert len(server.requests) == 3
