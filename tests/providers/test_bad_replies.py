"""Replies a provider (or a proxy, or a compatible server) gets wrong, through the official SDKs
against the local wire server: each ends as a readable reply or a stable failure code, never
as an exception of another type and never as something the log cannot read back.

What each becomes is the rule in ``stead.providers._lenient`` and the wire modules'
docstrings: token counts clamped to non-negative ints (unreadable ones not counted), text
made readable, missing tool-call ids marked, unknown stop reasons and block types kept or
skipped; a body that is not a stream, or event data that is not an object, is
``malformed_result`` (not retried).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from wire_server import Reply, WireServer
from wire_shapes import anthropic_events, openai_chunks, sse

import stead
from stead import AbortSignal, ProviderError
from stead.core.events import AssistantMessageRecorded, ModelCallFailed, ToolResultRecorded
from stead.core.messages import Usage, UserMessage
from stead.core.states import RunStatus
from stead.providers import ModelCall, ModelProvider, ModelRequest, ModelResponse
from stead.providers._failures import MalformedReply
from stead.providers._lenient import MAX_COUNT, count
from stead.providers._wire_anthropic import AnthropicReply
from stead.providers._wire_openai import OpenAIReply
from stead.providers.anthropic import AnthropicModel
from stead.providers.openai import OpenAIModel
from stead.runtime import Backoff
from stead.testing import assert_valid_history

KINDS = ["anthropic", "openai"]
REQUEST = ModelRequest(model="m", system="", messages=(UserMessage(content="Hi"),), turn_index=2)
FAST = Backoff(base=0.001, cap=0.001)
Mutate = Callable[[list[dict[str, Any]]], None]


def model_for(kind: str, server: WireServer) -> ModelProvider:
    if kind == "anthropic":
        return AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=server.url)
    return OpenAIModel("gpt-4.1", api_key="k", base_url=server.url + "/v1")


def anthropic_reply(mutate: Mutate, *, text: str = "Hello", tools: Any = None) -> Reply:
    tools = [("toolu_1", "lookup", ['{"order_id": 42}'])] if tools is None else tools
    events = [json.loads(e.split(b"data: ", 1)[1]) for e in anthropic_events([text], tools)]
    mutate(events)
    return Reply(events=[sse(e.get("type") if isinstance(e, dict) else None, e) for e in events])


def openai_reply(mutate: Mutate, *, text: str = "Hello", tools: Any = None) -> Reply:
    tools = [("call_1", "lookup", ['{"order_id": 42}'])] if tools is None else tools
    chunks = openai_chunks([text], tools)
    mutate(chunks)
    return Reply(events=[*(sse(None, c) for c in chunks), sse(None, "[DONE]")])


def reply_for(kind: str, mutate: Mutate, **kw: Any) -> Reply:
    return anthropic_reply(mutate, **kw) if kind == "anthropic" else openai_reply(mutate, **kw)


async def complete(kind: str, server: WireServer, reply: Reply) -> ModelResponse:
    server.push(reply)
    return await model_for(kind, server).complete(ModelCall(REQUEST, AbortSignal()))


async def fails(kind: str, server: WireServer, reply: Reply) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await complete(kind, server, reply)
    return caught.value


def tool_blocks(kind: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool call starts of a reply: Anthropic tool_use blocks, OpenAI first fragments."""
    if kind == "anthropic":
        return [
            e["content_block"]
            for e in events
            if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"
        ]
    return [
        f
        for c in events
        for ch in c["choices"]
        for f in ch["delta"].get("tool_calls") or ()
        if "id" in f
    ]


def set_usage(kind: str, value: object) -> Mutate:
    def mutate(events: list[dict[str, Any]]) -> None:
        if kind == "anthropic":
            events[0]["message"]["usage"]["input_tokens"] = value
            events[-2]["usage"]["output_tokens"] = value
        else:
            events[-1]["usage"]["prompt_tokens"] = value
            events[-1]["usage"]["completion_tokens"] = value

    return mutate


# -- a body that is not a stream --------------------------------------------------------------


NOT_STREAMS = {
    "json": Reply(body={"id": "msg_1", "type": "message", "content": [], "choices": []}),
    "json-error": Reply(body={"error": {"type": "api_error", "message": "proxy says no"}}),
    "html": Reply(raw=b"<html><body>Sign in</body></html>", content_type="text/html"),
    "not-sse": Reply(events=[b"hello, this is not server-sent events\n\n"]),
    "empty": Reply(raw=b"", content_type="text/event-stream"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("body", sorted(NOT_STREAMS))
async def test_a_200_that_is_not_a_stream_is_malformed_result(
    kind: str, body: str, server: WireServer
) -> None:
    failure = await fails(kind, server, NOT_STREAMS[body])
    assert failure.code == "malformed_result"
    assert "carried no server-sent events" in str(failure)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_run_answered_with_json_fails_once_instead_of_retrying(
    kind: str, server: WireServer, tmp_path: Path
) -> None:
    for _ in range(5):
        server.push(Reply(body={"id": "msg_1", "type": "message", "content": []}))
    agent = stead.Agent("json", model_for(kind, server))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "Hello")
        view = await rt.run(rid)
        events = [e.event for e in await rt.events(rid)]
    assert view.status is RunStatus.FAILED
    assert view.error is not None and view.error["code"] == "malformed_result"
    assert [e.code for e in events if isinstance(e, ModelCallFailed)] == ["malformed_result"]
    assert len(server.requests) == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("data", [[1, 2], "a string", 7, None])
async def test_event_data_that_is_not_an_object_is_malformed_result(
    kind: str, data: object, server: WireServer
) -> None:
    head = anthropic_events(["x"])[:1] if kind == "anthropic" else []
    event = "content_block_start" if kind == "anthropic" else None
    reply = Reply(events=[*head, sse(event, json.dumps(data))])
    assert (await fails(kind, server, reply)).code == "malformed_result"


@pytest.mark.parametrize("kind", KINDS)
async def test_event_data_nested_too_deep_to_decode_is_malformed_result(
    kind: str, server: WireServer
) -> None:
    """``[[[[...]]]]`` 100,000 deep raised ``RecursionError`` out of the SDK's decoder."""
    deep = b"[" * 100_000 + b"]" * 100_000
    head = anthropic_events(["x"])[:1] if kind == "anthropic" else []
    name = b"event: content_block_start\n" if kind == "anthropic" else b""
    reply = Reply(events=[*head, name + b"data: " + deep + b"\n\n"])
    assert (await fails(kind, server, reply)).code == "malformed_result"


@pytest.mark.parametrize("index", [float("inf"), float("nan"), 1e300])
def test_an_index_no_int_can_hold_is_malformed(index: float) -> None:
    anthropic_reply_ = AnthropicReply()
    event = {"type": "content_block_start", "index": index, "content_block": {"type": "text"}}
    openai_reply_ = OpenAIReply()
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": "a"}]}}]}
    if index == 1e300:  # an int holds it: a reply with one odd index, still readable
        anthropic_reply_.feed(event)
        openai_reply_.feed(chunk)
        return
    with pytest.raises(MalformedReply):
        anthropic_reply_.feed(event)
    with pytest.raises(MalformedReply):
        openai_reply_.feed(chunk)


# -- numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "counted"),
    [
        (-5, 0),
        (12.0, 12),
        (1.5, 1),
        (10**30, MAX_COUNT),
        ("17", 17),
        ("ten", None),
        (None, None),
        ([1], None),
        ({"n": 1}, None),
        (float("nan"), None),
        (True, None),
    ],
)
def test_a_token_count_is_clamped_or_not_counted(value: object, counted: int | None) -> None:
    assert count(value) == counted


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value", [-5, 1.5, 10**30, "ten", None, [1], {"n": 1}])
async def test_usage_numbers_a_provider_gets_wrong_are_clamped(
    kind: str, value: object, server: WireServer
) -> None:
    response = await complete(kind, server, reply_for(kind, set_usage(kind, value)))
    usage = response.usage
    fields = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
    )
    assert all(type(n) is int and 0 <= n <= MAX_COUNT for n in fields)
    expected = count(value)
    if expected is not None:
        assert usage.output_tokens == expected
    assert response.message.text == "Hello"  # the reply itself is kept


async def test_openai_details_that_are_not_an_object_count_nothing(server: WireServer) -> None:
    def mutate(chunks: list[dict[str, Any]]) -> None:
        chunks[-1]["usage"]["prompt_tokens_details"] = "lots"

    response = await complete("openai", server, openai_reply(mutate))
    assert response.usage.input_tokens == 40 and response.usage.cache_read_input_tokens == 0


@pytest.mark.parametrize("kind", ["anthropic", "openai", "openai-compatible"])
@pytest.mark.parametrize("value", [-5, "ten", 10**30])
async def test_a_run_with_nonsense_usage_reads_back(
    kind: str, value: object, server: WireServer, tmp_path: Path
) -> None:
    """Negative usage was written and then every read of the run raised ``CorruptEvent``;
    ``"ten"`` failed the call with ``executor_error``."""
    wire = "anthropic" if kind == "anthropic" else "openai"
    server.push(reply_for(wire, set_usage(wire, value), tools=[]))
    provider = (
        model_for(wire, server)
        if kind != "openai-compatible"
        else OpenAIModel.compatible_server("qwen3", server.url + "/v1")
    )
    agent = stead.Agent("usage", provider)
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "Hello")
        view = await rt.run(rid)
        state = await rt.state(rid)
        events = [e.event for e in await rt.events(rid)]
    assert view.status is RunStatus.COMPLETED and view.output == "Hello"
    assert all(n >= 0 for n in vars_of(view.usage))
    assert [e for e in events if isinstance(e, ModelCallFailed)] == []
    assert state.usage == view.usage


def vars_of(usage: Usage) -> tuple[int, ...]:
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
    )


# -- tool calls, stop reasons, blocks ---------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("given", ["absent", None, ""])
async def test_a_tool_call_without_an_id_gets_a_marked_one(
    kind: str, given: object, server: WireServer
) -> None:
    def mutate(events: list[dict[str, Any]]) -> None:
        for block in tool_blocks(kind, events):
            if given == "absent":
                del block["id"]
            else:
                block["id"] = given

    (call,) = (await complete(kind, server, reply_for(kind, mutate))).message.tool_calls
    position = 1 if kind == "anthropic" else 0  # the content block's index; the call's index
    assert call.id == f"missing_id_2_{position}"  # turn 2 of REQUEST
    assert call.name == "lookup" and call.arguments == '{"order_id": 42}'


@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_call_without_a_name_or_with_odd_fields_stays_readable(
    kind: str, server: WireServer
) -> None:
    def mutate(events: list[dict[str, Any]]) -> None:
        for block in tool_blocks(kind, events):
            block["id"] = 5
            if kind == "anthropic":
                block["name"] = None
            else:
                block["function"]["name"] = None

    (call,) = (await complete(kind, server, reply_for(kind, mutate))).message.tool_calls
    assert (call.id, call.name) == ("5", "")  # the run answers it: unknown tool ''


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"text"', "\u00e9\u4e2d"])
async def test_arguments_that_are_not_a_json_object_are_kept_as_sent(
    kind: str, arguments: str, server: WireServer
) -> None:
    reply = reply_for(kind, lambda _: None, tools=[("id_1", "lookup", [arguments])])
    (call,) = (await complete(kind, server, reply)).message.tool_calls
    assert call.arguments == arguments  # the run answers it with an is_error result


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reason", ["pause_turn", "a_reason_from_2030", 5])
async def test_a_stop_reason_we_do_not_know_is_kept_as_text(
    kind: str, reason: object, server: WireServer
) -> None:
    def mutate(events: list[dict[str, Any]]) -> None:
        if kind == "anthropic":
            events[-2]["delta"]["stop_reason"] = reason
        else:
            events[-2]["choices"][0]["finish_reason"] = reason

    response = await complete(kind, server, reply_for(kind, mutate, tools=[]))
    assert response.message.stop_reason == str(reason)


async def test_blocks_and_deltas_of_unknown_types_are_skipped(server: WireServer) -> None:
    def mutate(events: list[dict[str, Any]]) -> None:
        block = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
        events[1:1] = [
            {"type": "content_block_start", "index": 9, "content_block": block},
            {"type": "content_block_delta", "index": 9, "delta": {"type": "citations_delta"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "a_new_delta"}},
            {"type": "content_block_stop", "index": 9},
            {"type": "an_event_from_2030", "data": [1, 2, 3]},
        ]

    response = await complete("anthropic", server, anthropic_reply(mutate))
    assert response.message.text == "Hello"
    assert [c.id for c in response.message.tool_calls] == ["toolu_1"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value", [5, None, {"a": 1}])
async def test_text_that_is_not_a_string_is_made_readable(
    kind: str, value: object, server: WireServer
) -> None:
    def mutate(events: list[dict[str, Any]]) -> None:
        if kind == "anthropic":
            (delta,) = [e for e in events if e["type"] == "content_block_delta"][:1]
            delta["delta"]["text"] = value
        else:
            events[1]["choices"][0]["delta"]["content"] = value

    response = await complete(kind, server, reply_for(kind, mutate, tools=[]))
    assert response.message.text == ("" if value is None else json.dumps(value))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("index", [None, "x", [0]])
async def test_an_index_that_is_not_a_number_is_malformed_result(
    kind: str, index: object, server: WireServer
) -> None:
    def mutate(events: list[dict[str, Any]]) -> None:
        if kind == "anthropic":
            for e in events:
                if "index" in e:
                    e["index"] = index
        else:
            for block in tool_blocks(kind, events):
                block["index"] = index

    assert (await fails(kind, server, reply_for(kind, mutate))).code == "malformed_result"


# -- errors inside the stream, and a stream cut at any byte -----------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "error",
    [
        {"type": "overloaded_error", "message": "Overloaded"},
        {"type": "a_new_error", "message": "?"},
        "just a string",
        [1, 2],
        None,
    ],
)
async def test_an_error_event_of_any_shape_is_a_stable_code(
    kind: str, error: object, server: WireServer
) -> None:
    if kind == "anthropic":
        head = anthropic_events(["x"])[:1]
        events = [*head, sse("error", {"type": "error", "error": error})]
    else:
        events = [sse(None, openai_chunks(["x"])[0]), sse(None, {"error": error})]
    failure = await fails(kind, server, Reply(events=events))
    assert failure.code in {"provider_unavailable", "connection_failed", "malformed_result"}


def _stream_bytes(kind: str) -> list[bytes]:
    text = ["Order 42 ", "h\u00e9s shipped."]
    if kind == "anthropic":
        return anthropic_events(text, [("toolu_1", "l", ['{"a":', "1}"])])
    chunks = openai_chunks(text, [("call_1", "l", ['{"a":', "1}"])])
    return [*(sse(None, c) for c in chunks), sse(None, "[DONE]")]


def cut_points(events: list[bytes]) -> list[int]:
    """Where to cut: either side of every event boundary and of every line break, inside
    each multi-byte character, and a stride through the rest (each cut is one request)."""
    body = b"".join(events)
    points = {0, len(body)}
    for i, byte in enumerate(body):
        if byte == ord("\n") or byte >= 0x80:
            points.update((i, i + 1))
    points.update(range(0, len(body), 61))
    return sorted(p for p in points if 0 <= p <= len(body))


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_cut_at_any_byte_is_connection_failed_or_the_whole_reply(
    kind: str, server: WireServer
) -> None:
    events = _stream_bytes(kind)
    model, client = shared_model(kind, server)
    codes: set[str] = set()
    try:
        for offset in cut_points(events):
            server.push(Reply(events=events, cut_at_byte=offset))
            try:
                response = await model.complete(ModelCall(REQUEST, AbortSignal()))
            except ProviderError as failure:
                codes.add(failure.code)
                continue
            # Only a cut after the reply said it was complete yields one, and all of it.
            assert response.message.text == "Order 42 h\u00e9s shipped."
            assert [c.arguments for c in response.message.tool_calls] == ['{"a":1}']
    finally:
        await client.close()
    assert codes <= {"connection_failed", "malformed_result"}, codes
    assert "connection_failed" in codes


def shared_model(kind: str, server: WireServer) -> tuple[ModelProvider, Any]:
    """A provider on one client for many calls (a client per call would cost more than the
    call: the SDK builds an SSL context for each)."""
    if kind == "anthropic":
        a = anthropic.AsyncAnthropic(api_key="k", base_url=server.url)
        return AnthropicModel("claude-sonnet-4-6", client=a), a
    o = openai.AsyncOpenAI(api_key="k", base_url=server.url + "/v1")
    return OpenAIModel("gpt-4.1", client=o), o


@pytest.mark.parametrize("kind", KINDS)
async def test_a_run_whose_reply_has_odd_ids_and_blocks_completes_and_reads_back(
    kind: str, server: WireServer, tmp_path: Path
) -> None:
    """The whole path: a reply whose tool call has no id, odd usage and an unknown stop
    reason is recorded, its call answered (by id), and the run reads back."""

    @stead.tool(effect="read_only")
    def lookup(order_id: int) -> str:
        """Look an order up."""
        return f"order {order_id}: shipped"

    def mutate(events: list[dict[str, Any]]) -> None:
        for block in tool_blocks(kind, events):
            del block["id"]
        set_usage(kind, -3)(events)

    server.push(reply_for(kind, mutate), reply_for(kind, lambda _: None, text="Shipped.", tools=[]))
    agent = stead.Agent("odd", model_for(kind, server), [lookup])
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "Where is 42?")
        view = await rt.run(rid)
        state = await rt.state(rid)
        events = [e.event for e in await rt.events(rid)]
    assert view.status is RunStatus.COMPLETED and view.output == "Shipped."
    assert_valid_history(state)
    (first, _) = [e for e in events if isinstance(e, AssistantMessageRecorded)]
    (call,) = first.message.tool_calls
    assert call.id.startswith("missing_id_0_")
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert (result.tool_call_id, result.is_error) == (call.id, False)
    assert result.content == "order 42: shipped"
