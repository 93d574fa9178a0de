"""``OpenAIModel`` through the official SDK against a local server speaking Chat Completions."""

from __future__ import annotations

import asyncio

import pytest
from wire_server import Reply, WireServer
from wire_shapes import openai_error, openai_events, openai_stream, sse

from _wait import until_async
from stead import Aborted, AbortSignal, ProviderError, ProviderHTTPError
from stead.core.messages import (
    AssistantMessage,
    NoticeMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from stead.providers import ModelCall, ModelRequest
from stead.providers.openai import OpenAIModel

REQUEST = ModelRequest(
    model="gpt-4.1",
    system="You help.",
    messages=(UserMessage(content="Where is order 42?"),),
    max_output_tokens=500,
)


async def test_streams_text_deltas_and_asks_for_usage(server: WireServer, gpt: OpenAIModel) -> None:
    server.push(
        openai_stream("Order 42 ", "has ", "shipped.", prompt_tokens=1300, cached_tokens=1024)
    )
    shown: list[str] = []
    response = await gpt.complete(ModelCall(REQUEST, AbortSignal(), shown.append))

    assert shown == ["Order 42 ", "has ", "shipped."]
    assert response.message.text == "Order 42 has shipped."
    assert response.message.stop_reason == "end_turn"
    assert response.model == "gpt-4.1-2025-04-14"
    assert response.usage.input_tokens == 1300 - 1024
    assert response.usage.cache_read_input_tokens == 1024
    seen = server.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test"
    assert seen.headers["x-stainless-retry-count"] == "0"
    assert seen.body["stream"] is True
    assert seen.body["stream_options"] == {"include_usage": True}
    assert seen.body["max_completion_tokens"] == 500


@pytest.mark.parametrize(
    ("status", "message", "kind", "code", "stead_code"),
    [
        (400, "Invalid 'messages[2].tool_call_id'", "invalid_request_error", None, "bad_request"),
        (400, "This model's maximum context length is 128000 tokens. However, your messages "
         "resulted in 204308 tokens.", "invalid_request_error", "context_length_exceeded",
         "context_length_exceeded"),
        (401, "Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key",
         "authentication_failed"),
        (403, "Country, region, or territory not supported", "request_forbidden",
         "unsupported_country_region_territory", "authentication_failed"),
        (404, "The model `gpt-9` does not exist", "invalid_request_error", "model_not_found",
         "bad_request"),
        (429, "Rate limit reached for gpt-4.1 on tokens per min", "tokens", "rate_limit_exceeded",
         "rate_limited"),
        (429, "You exceeded your current quota", "insufficient_quota", "insufficient_quota",
         "billing"),
        (500, "The server had an error while processing your request.", "server_error", None,
         "provider_unavailable"),
        (503, "The engine is currently overloaded", "server_error", None, "provider_unavailable"),
    ],
)  # fmt: skip
async def test_each_error_status_maps_to_its_code_in_one_attempt(
    server: WireServer,
    gpt: OpenAIModel,
    status: int,
    message: str,
    kind: str,
    code: str | None,
    stead_code: str,
) -> None:
    server.push(openai_error(status, message, kind, code, retry_after_ms="1500"))
    with pytest.raises(ProviderHTTPError) as caught:
        await gpt.complete(ModelCall(REQUEST, AbortSignal()))
    assert (caught.value.status, caught.value.code) == (status, stead_code)
    assert caught.value.retry_after == 1.5
    assert message in str(caught.value)
    assert len(server.requests) == 1  # the SDK's own retries are off: stead decides


async def test_an_error_object_inside_the_stream(server: WireServer, gpt: OpenAIModel) -> None:
    events = openai_events(["Partial "])[:2]
    error = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    server.push(Reply(events=[*events, sse(None, error)]))
    with pytest.raises(ProviderError) as caught:
        await gpt.complete(ModelCall(REQUEST, AbortSignal()))
    assert not isinstance(caught.value, ProviderHTTPError)
    assert caught.value.code == "provider_unavailable"


async def test_a_stream_cut_mid_body_is_connection_failed(
    server: WireServer, gpt: OpenAIModel
) -> None:
    server.push(openai_stream("Order ", "42 ", "has ", "shipped.", cut_after=3))
    shown: list[str] = []
    with pytest.raises(ProviderError) as caught:
        await gpt.complete(ModelCall(REQUEST, AbortSignal(), shown.append))
    assert caught.value.code == "connection_failed"
    assert shown == ["Order ", "42 "]


async def test_a_stream_that_ends_before_a_finish_reason_is_connection_failed(
    server: WireServer, gpt: OpenAIModel
) -> None:
    server.push(Reply(events=openai_events(["Order 42"])[:2]))  # no finish_reason, no [DONE]
    with pytest.raises(ProviderError) as caught:
        await gpt.complete(ModelCall(REQUEST, AbortSignal()))
    assert caught.value.code == "connection_failed"


async def test_unparseable_chunk_is_malformed_result(server: WireServer, gpt: OpenAIModel) -> None:
    server.push(Reply(events=[openai_events(["a"])[0], b"data: {truncated\n\n"]))
    with pytest.raises(ProviderError) as caught:
        await gpt.complete(ModelCall(REQUEST, AbortSignal()))
    assert caught.value.code == "malformed_result"


async def test_no_response_headers_in_time_is_deadline_exceeded(server: WireServer) -> None:
    model = OpenAIModel("gpt-4.1", api_key="k", base_url=server.url + "/v1", timeout=0.2)
    server.push(Reply(events=openai_events(["late"]), delay=0.6))
    with pytest.raises(ProviderError) as caught:
        await model.complete(ModelCall(REQUEST, AbortSignal()))
    assert caught.value.code == "deadline_exceeded"


async def test_abort_closes_the_in_flight_stream(server: WireServer, gpt: OpenAIModel) -> None:
    reply = openai_stream("First words ", "and more", stall_after=2)
    server.push(reply)
    signal = AbortSignal()
    shown: list[str] = []
    call = asyncio.ensure_future(gpt.complete(ModelCall(REQUEST, signal, shown.append)))
    assert await asyncio.to_thread(reply.stalled.wait, 10)
    # until the delta the server sent before stalling has arrived
    await until_async(lambda: shown, "the delta sent before the stall", timeout=10)
    await asyncio.to_thread(signal.abort, "cancelled by the operator")
    with pytest.raises(Aborted, match="cancelled by the operator"):
        await asyncio.wait_for(call, 10)
    assert await asyncio.to_thread(reply.client_closed.wait, 10)
    assert shown == ["First words "]


async def test_an_openai_compatible_server(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM-style: no usage chunk, notices as user messages, max_tokens, and never the
    OpenAI key."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key")
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    model = OpenAIModel.compatible_server("qwen3", server.url + "/v1")
    server.push(openai_stream("Fine.", model="qwen3", usage=False))
    request = ModelRequest(
        model="qwen3",
        system="You help.",
        messages=(
            UserMessage(content="q"),
            AssistantMessage(tool_calls=(ToolCall(id="c1", name="t", arguments="{}"),)),
            ToolResultMessage(tool_call_id="c1", name="t", content="boom", is_error=True),
            NoticeMessage(content="Final turn: answer now."),
        ),
        max_output_tokens=64,
    )
    response = await model.complete(ModelCall(request, AbortSignal()))
    assert response.message.text == "Fine."
    assert response.usage.total_tokens == 0
    seen = server.requests[0]
    assert "sk-real-openai-key" not in seen.headers.get("authorization", "")
    assert seen.body["max_tokens"] == 64
    assert [m["role"] for m in seen.body["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
    ]
    assert seen.body["messages"][3]["content"] == "ERROR: boom"
    assert seen.body["messages"][4]["content"] == "[system notice] Final turn: answer now."


async def test_vllm_error_shape_for_context_length(server: WireServer) -> None:
    model = OpenAIModel.compatible_server("qwen3", server.url + "/v1")
    body = {
        "object": "error",
        "message": "This model's maximum context length is 32768 tokens. However, you requested "
        "40000 tokens (39000 in the messages, 1000 in the completion).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    server.push(Reply(status=400, body=body))
    with pytest.raises(ProviderHTTPError) as caught:
        await model.complete(ModelCall(REQUEST, AbortSignal()))
    assert caught.value.code == "context_length_exceeded"
