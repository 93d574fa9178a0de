"""The call both adapters share (``_sdk.SDKCaller``): each SDK's exceptions, as the SDK builds
them, translated by one rule; and a caller-owned client used as given, never closed."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import openai
import pytest

try:
    import httpx2
except ImportError:  # SDKs built on httpx rather than httpx2
    import httpx as httpx2  # type: ignore[no-redef]
from wire_server import WireServer
from wire_shapes import anthropic_error, anthropic_stream, openai_error, openai_stream

from stead import AbortSignal, ProviderError, ProviderHTTPError
from stead.core.messages import Usage, UserMessage
from stead.providers import ModelCall, ModelProvider, ModelRequest
from stead.providers._sdk import SDKCaller
from stead.providers.anthropic import AnthropicModel
from stead.providers.openai import OpenAIModel

REQUEST = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
NOW = 1_760_000_000.0
USAGE = Usage(input_tokens=12)


def _response(status: int, **headers: str) -> Any:
    return httpx2.Response(status, headers=headers, request=REQUEST)


def _caller(kind: str) -> SDKCaller[Any]:
    model: Any = (
        AnthropicModel("m", api_key="k", clock=lambda: NOW)
        if kind == "anthropic"
        else OpenAIModel("m", api_key="k", clock=lambda: NOW)
    )
    caller: SDKCaller[Any] = model._caller
    return caller


ANTHROPIC_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}
OPENAI_SERVER_ERROR = {"message": "The server had an error", "type": "server_error", "code": None}


@pytest.mark.parametrize(
    ("kind", "exc", "cls", "code", "status", "retry_after", "message"),
    [
        (
            "anthropic",
            anthropic.RateLimitError(
                "slow down",
                response=_response(429, **{"retry-after": "3"}),
                body={"type": "error", "error": {"type": "rate_limit_error", "message": "Slow"}},
            ),
            ProviderHTTPError, "rate_limited", 429, 3.0, "anthropic 429 rate_limit_error: Slow",
        ),
        (
            "openai",
            openai.RateLimitError(
                "quota",
                response=_response(429, **{"retry-after-ms": "1500"}),
                body={"message": "You exceeded your quota", "code": "insufficient_quota"},
            ),
            ProviderHTTPError, "billing", 429, 1.5,
            "openai 429 insufficient_quota: You exceeded your quota",
        ),
        (
            # Anthropic's ``error`` event inside a 200 stream: a status error carrying the 200.
            "anthropic",
            anthropic.APIStatusError("x", response=_response(200), body=ANTHROPIC_OVERLOADED),
            ProviderError, "provider_unavailable", None, None,
            "anthropic 200 overloaded_error: Busy",
        ),
        (
            # OpenAI's error object inside a 200 stream: a bare APIError.
            "openai",
            openai.APIError("x", REQUEST, body=OPENAI_SERVER_ERROR),
            ProviderError, "provider_unavailable", None, None,
            "openai: server_error: The server had an error",
        ),
        (
            "anthropic",
            anthropic.APIResponseValidationError(_response(200), None, message="not a Message"),
            ProviderError, "malformed_result", None, None, "anthropic: not a Message",
        ),
        (
            "openai",
            openai.APIResponseValidationError(_response(200), None, message="not a chunk"),
            ProviderError, "malformed_result", None, None, "openai: not a chunk",
        ),
        (
            "anthropic",
            anthropic.APITimeoutError(request=REQUEST),
            ProviderError, "deadline_exceeded", None, None, "anthropic: APITimeoutError: ",
        ),
        (
            "openai",
            openai.APIConnectionError(request=REQUEST),
            ProviderError, "connection_failed", None, None, "openai: APIConnectionError: ",
        ),
    ],
)  # fmt: skip
def test_each_sdk_exception_is_translated_by_the_one_rule(
    kind: str,
    exc: Exception,
    cls: type[ProviderError],
    code: str,
    status: int | None,
    retry_after: float | None,
    message: str,
) -> None:
    error = _caller(kind).translate(exc, USAGE)
    assert type(error) is cls
    assert error.code == code
    assert str(error).startswith(message)
    assert error.usage == USAGE
    if isinstance(error, ProviderHTTPError):
        assert (error.status, error.retry_after) == (status, retry_after)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_an_exception_that_is_no_wire_failure_is_raised_as_itself(kind: str) -> None:
    bug = KeyError("a bug of ours")
    with pytest.raises(KeyError) as caught:
        _caller(kind).translate(bug, None)
    assert caught.value is bug


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_shared_client_is_used_for_every_call_and_left_open(
    kind: str, server: WireServer
) -> None:
    model: ModelProvider
    client: anthropic.AsyncAnthropic | openai.AsyncOpenAI
    if kind == "anthropic":
        client = anthropic.AsyncAnthropic(api_key="shared-key", base_url=server.url)
        model = AnthropicModel("claude-sonnet-4-6", client=client)
        server.push(anthropic_stream("one"), anthropic_stream("two"))
    else:
        client = openai.AsyncOpenAI(api_key="shared-key", base_url=server.url + "/v1")
        model = OpenAIModel("gpt-4.1", client=client)
        server.push(openai_stream("one"), openai_stream("two"))
    request = ModelRequest(model=model.model_name, system="", messages=(UserMessage(content="hi"),))
    try:
        first = await model.complete(ModelCall(request, AbortSignal()))
        second = await model.complete(ModelCall(request, AbortSignal()))
        assert (first.message.text, second.message.text) == ("one", "two")
        assert not client.is_closed()  # the owner closes it, not the adapter
        for seen in server.requests:  # sent with the shared client's key
            auth = seen.headers.get("x-api-key", "") + seen.headers.get("authorization", "")
            assert "shared-key" in auth
    finally:
        await client.close()


def test_the_clock_is_read_for_an_http_date_retry_after() -> None:
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(NOW + 20))
    exc = anthropic.InternalServerError(
        "busy", response=_response(503, **{"retry-after": when}), body=None
    )
    error = _caller("anthropic").translate(exc, None)
    assert isinstance(error, ProviderHTTPError) and error.retry_after == 20.0


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_shared_clients_own_retries_are_off(kind: str, server: WireServer) -> None:
    """A client made with the SDK's default ``max_retries=2`` retried every 529 itself, under
    stead's own retries: up to three requests per attempt the run loop recorded."""
    model: ModelProvider
    client: anthropic.AsyncAnthropic | openai.AsyncOpenAI
    if kind == "anthropic":
        client = anthropic.AsyncAnthropic(api_key="shared-key", base_url=server.url)
        model = AnthropicModel("claude-sonnet-4-6", client=client)
        busy = anthropic_error(529, "overloaded_error", "Overloaded", retry_after="0")
    else:
        client = openai.AsyncOpenAI(api_key="shared-key", base_url=server.url + "/v1")
        model = OpenAIModel("gpt-4.1", client=client)
        busy = openai_error(503, "busy", "server_error", retry_after="0")
    server.push(busy, busy, busy)
    request = ModelRequest(model=model.model_name, system="", messages=(UserMessage(content="hi"),))
    try:
        with pytest.raises(ProviderHTTPError) as caught:
            await model.complete(ModelCall(request, AbortSignal()))
        assert caught.value.code == "provider_unavailable"
        assert len(server.requests) == 1
        assert server.requests[0].headers["x-stainless-retry-count"] == "0"
        assert client.max_retries == 2  # the caller's client itself is left as it was
        assert not client.is_closed()
    finally:
        await client.close()
