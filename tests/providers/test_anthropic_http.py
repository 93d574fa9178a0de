"""``AnthropicModel`` through the official SDK against a local server speaking the Messages API."""

from __future__ import annotations

import asyncio

import pytest
from wire_server import Reply, WireServer
from wire_shapes import anthropic_error, anthropic_error_event, anthropic_events, anthropic_stream

from _wait import until_async
from stead import Aborted, AbortSignal, ProviderError, ProviderHTTPError
from stead.core.messages import ToolSchema, UserMessage
from stead.providers import ModelCall, ModelRequest
from stead.providers.anthropic import AnthropicModel

REQUEST = ModelRequest(
    model="claude-sonnet-4-6",
    system="You help.",
    messages=(UserMessage(content="Where is order 42?"),),
    tools=(ToolSchema(name="lookup_order", description="Look up an order.", parameters={}),),
)


async def test_streams_text_deltas_and_sends_a_real_messages_request(
    server: WireServer, claude: AnthropicModel
) -> None:
    server.push(anthropic_stream("Order 42 ", "has ", "shipped.", cache_read=1800))
    shown: list[str] = []
    response = await claude.complete(ModelCall(REQUEST, AbortSignal(), shown.append))

    assert shown == ["Order 42 ", "has ", "shipped."]
    assert response.message.text == "Order 42 has shipped."
    assert response.message.stop_reason == "end_turn"
    assert response.usage.cache_read_input_tokens == 1800
    seen = server.requests[0]
    assert seen.path == "/v1/messages"
    assert "anthropic-version" in seen.headers
    assert "sk-ant-test" in (
        seen.headers.get("x-api-key", "") + seen.headers.get("authorization", "")
    )
    assert seen.headers["x-stainless-retry-count"] == "0"
    assert seen.body["stream"] is True
    assert seen.body["tools"][0]["name"] == "lookup_order"
    assert seen.body["system"][0]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize(
    ("status", "kind", "message", "code"),
    [
        (400, "invalid_request_error", "messages: roles must alternate", "bad_request"),
        (400, "invalid_request_error", "prompt is too long: 208123 tokens > 200000 maximum",
         "context_length_exceeded"),
        (401, "authentication_error", "invalid x-api-key", "authentication_failed"),
        (402, "billing_error", "Your credit balance is too low", "billing"),
        (403, "permission_error", "Your API key does not have permission", "authentication_failed"),
        (404, "not_found_error", "model: claude-nope", "bad_request"),
        (413, "request_too_large", "Request exceeds the maximum allowed number of bytes",
         "bad_request"),
        (429, "rate_limit_error", "Number of request tokens has exceeded your rate limit",
         "rate_limited"),
        (500, "api_error", "Internal server error", "provider_unavailable"),
        (503, "api_error", "Service unavailable", "provider_unavailable"),
        (529, "overloaded_error", "Overloaded", "provider_unavailable"),
    ],
)  # fmt: skip
async def test_each_error_status_maps_to_its_code_in_one_attempt(
    server: WireServer, claude: AnthropicModel, status: int, kind: str, message: str, code: str
) -> None:
    server.push(anthropic_error(status, kind, message, retry_after="3"))
    with pytest.raises(ProviderHTTPError) as caught:
        await claude.complete(ModelCall(REQUEST, AbortSignal()))
    assert caught.value.status == status
    assert caught.value.code == code
    assert caught.value.retry_after == 3.0
    assert message in str(caught.value)
    assert len(server.requests) == 1  # the SDK's own retries are off: stead decides


async def test_an_error_event_inside_the_stream(server: WireServer, claude: AnthropicModel) -> None:
    events = anthropic_events(["Partial "], input_tokens=40)[:4]
    server.push(Reply(events=[*events, anthropic_error_event("overloaded_error", "Overloaded")]))
    with pytest.raises(ProviderError) as caught:
        await claude.complete(ModelCall(REQUEST, AbortSignal()))
    assert not isinstance(caught.value, ProviderHTTPError)
    assert caught.value.code == "provider_unavailable"
    assert caught.value.usage is not None and caught.value.usage.input_tokens == 40


async def test_a_stream_cut_mid_body_is_connection_failed_with_partial_usage(
    server: WireServer, claude: AnthropicModel
) -> None:
    server.push(anthropic_stream("Order ", "42 ", "has ", "shipped.", input_tokens=77, cut_after=5))
    shown: list[str] = []
    with pytest.raises(ProviderError) as caught:
        await claude.complete(ModelCall(REQUEST, AbortSignal(), shown.append))
    assert caught.value.code == "connection_failed"
    assert shown == ["Order ", "42 "]
    assert caught.value.usage is not None and caught.value.usage.input_tokens == 77


async def test_a_stream_that_ends_cleanly_but_early_is_connection_failed(
    server: WireServer, claude: AnthropicModel
) -> None:
    server.push(Reply(events=anthropic_events(["Order 42"])[:5]))  # no message_stop
    with pytest.raises(ProviderError) as caught:
        await claude.complete(ModelCall(REQUEST, AbortSignal()))
    assert caught.value.code == "connection_failed"


async def test_unparseable_event_data_is_malformed_result(
    server: WireServer, claude: AnthropicModel
) -> None:
    events = anthropic_events(["Order 42"])
    server.push(Reply(events=[events[0], b"event: content_block_start\ndata: {not json\n\n"]))
    with pytest.raises(ProviderError) as caught:
        await claude.complete(ModelCall(REQUEST, AbortSignal()))
    assert caught.value.code == "malformed_result"


async def test_a_stalled_stream_hits_the_timeout(server: WireServer) -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=server.url, timeout=0.3)
    reply = anthropic_stream("never", "finishes", stall_after=4)
    server.push(reply)
    with pytest.raises(ProviderError) as caught:
        await model.complete(ModelCall(REQUEST, AbortSignal()))
    assert caught.value.code == "deadline_exceeded"


async def test_abort_closes_the_in_flight_stream(
    server: WireServer, claude: AnthropicModel
) -> None:
    reply = anthropic_stream("First words ", "and more", stall_after=4)
    server.push(reply)
    signal = AbortSignal()
    shown: list[str] = []
    call = asyncio.ensure_future(claude.complete(ModelCall(REQUEST, signal, shown.append)))
    assert await asyncio.to_thread(reply.stalled.wait, 10)
    # until the delta the server sent before stalling has arrived
    await until_async(lambda: shown, "the delta sent before the stall", timeout=10)
    # abort from another thread, as a canceller (an HTTP handler, a signal handler) would
    await asyncio.to_thread(signal.abort, "cancelled by the operator")
    with pytest.raises(Aborted, match="cancelled by the operator"):
        await asyncio.wait_for(call, 10)
    assert await asyncio.to_thread(reply.client_closed.wait, 10)  # the server saw it go
    assert shown == ["First words "]


async def test_an_already_aborted_signal_sends_nothing(
    server: WireServer, claude: AnthropicModel
) -> None:
    signal = AbortSignal()
    signal.abort("gone")
    with pytest.raises(Aborted):
        await claude.complete(ModelCall(REQUEST, signal))
    assert server.requests == []
