"""Foreign exceptions and headers translated at the boundary: each one covered."""

from __future__ import annotations

import asyncio
import email.utils
import json
from pathlib import Path

import anthropic

try:
    import httpx2
except ImportError:  # SDKs built on httpx rather than httpx2
    import httpx as httpx2  # type: ignore[no-redef]
import openai
import pytest

from stead.core.failures import is_retryable
from stead.providers._failures import (
    IncompleteReply,
    MalformedReply,
    code_for_exception,
    code_for_http,
    failure_code,
    retry_after_seconds,
)
from stead.testing import ScriptedModel

REQUEST = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
NOW = 1_760_000_000.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # ms is preferred
        ({"retry-after": email.utils.formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"retry-after": email.utils.formatdate(NOW - 30, usegmt=True)}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "-3"}, 0.0),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after(headers: dict[str, str] | None, seconds: float | None) -> None:
    assert retry_after_seconds(headers, NOW) == seconds


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (httpx2.ReadTimeout("read timed out", request=REQUEST), "deadline_exceeded"),
        (httpx2.ConnectTimeout("connect timed out", request=REQUEST), "deadline_exceeded"),
        (httpx2.PoolTimeout("no connection", request=REQUEST), "deadline_exceeded"),
        (anthropic.APITimeoutError(request=REQUEST), "deadline_exceeded"),
        (openai.APITimeoutError(request=REQUEST), "deadline_exceeded"),
        (TimeoutError(), "deadline_exceeded"),
        (
            httpx2.RemoteProtocolError("peer closed connection", request=REQUEST),
            "connection_failed",
        ),
        (httpx2.ReadError("connection reset", request=REQUEST), "connection_failed"),
        (httpx2.ConnectError("refused", request=REQUEST), "connection_failed"),
        (anthropic.APIConnectionError(request=REQUEST), "connection_failed"),
        (openai.APIConnectionError(request=REQUEST), "connection_failed"),
        (ConnectionResetError(), "connection_failed"),
        (IncompleteReply("no message_stop"), "connection_failed"),
        (json.JSONDecodeError("Expecting value", "data: {", 6), "malformed_result"),
        (MalformedReply("odd event"), "malformed_result"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "malformed_result"),
        (RecursionError("maximum recursion depth exceeded while decoding"), "malformed_result"),
        (KeyError("a bug of ours"), None),
    ],
)
def test_transport_and_parse_errors(exc: BaseException, code: str | None) -> None:
    assert code_for_exception(exc) == code


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (400, "bad_request", False),
        (401, "authentication_failed", False),
        (402, "billing", False),
        (403, "authentication_failed", False),
        (404, "bad_request", False),
        (408, "deadline_exceeded", True),
        (422, "bad_request", False),
        (429, "rate_limited", True),
        (500, "provider_unavailable", True),
        (502, "provider_unavailable", True),
        (503, "provider_unavailable", True),
        (529, "provider_unavailable", True),
    ],
)
def test_status_codes_and_retryability_from_the_code_alone(
    status: int, code: str, retryable: bool
) -> None:
    assert code_for_http(status, None) == code
    assert is_retryable(code) is retryable


class _ProviderDown(Exception):
    """A custom provider's own error, raised from its HTTP client's."""


def _chained(status: int, how: str) -> BaseException:
    """A custom provider's failure carrying ``status`` the way ``how`` says."""
    response = httpx2.Response(status, request=REQUEST)
    client = httpx2.HTTPStatusError(f"{status}", request=REQUEST, response=response)
    if how == "response":  # the client's error itself: .response.status_code
        return client
    if how == "attribute":
        err = _ProviderDown("down")
        err.status = status  # type: ignore[attr-defined]
        return err
    try:
        try:
            raise client
        except httpx2.HTTPStatusError as inner:
            if how == "cause":
                raise _ProviderDown("the model server failed") from inner
            raise _ProviderDown("the model server failed")  # noqa: B904 - __context__ only
    except _ProviderDown as outer:
        return outer
    raise AssertionError("unreachable")


@pytest.mark.parametrize("how", ["response", "attribute", "cause", "context"])
@pytest.mark.parametrize(
    ("status", "code"),
    [(503, "provider_unavailable"), (429, "rate_limited"), (401, "authentication_failed")],
)
def test_an_http_status_is_found_in_a_wrapped_or_chained_failure(
    how: str, status: int, code: str
) -> None:
    assert failure_code(_chained(status, how)) == code


@pytest.mark.parametrize(
    "exc",
    [EOFError("stream ended"), asyncio.IncompleteReadError(b"partial", 100)],
    ids=["EOFError", "IncompleteReadError"],
)
def test_a_stream_that_ended_early_is_a_cut_connection(exc: BaseException) -> None:
    assert code_for_exception(exc) == "connection_failed"
    assert failure_code(exc) == "connection_failed"
    assert is_retryable("connection_failed")


def test_a_bug_is_not_a_provider_failure() -> None:
    assert failure_code(ValueError("a bug")) is None


async def test_a_custom_providers_wrapped_503_is_retried(tmp_path: Path) -> None:
    """A provider of the caller's own raises its client's 503 wrapped in an error of its
    own: the call is retried (provider_unavailable), as the built-in adapters' 503 is."""
    import stead
    from stead.core.events import ModelCallFailed
    from stead.providers import ModelCall, ModelResponse
    from stead.runtime import Backoff

    class Flaky:
        model_name = "flaky"
        calls = 0

        async def complete(self, call: ModelCall) -> ModelResponse:
            self.calls += 1
            if self.calls == 1:
                raise _chained(503, "cause")
            return await ScriptedModel(["recovered"]).complete(call)

    flaky = Flaky()
    agent = stead.Agent("flaky", flaky, limits=stead.Limits(max_model_attempts=2))
    async with stead.Runtime(
        f"sqlite:///{tmp_path / 'runs.db'}",
        agents=[agent],
        backoff=Backoff(base=0.01, cap=0.01),
    ) as rt:
        rid = await rt.start(agent, "hello")
        view = await rt.run(rid)
        failed = [e.event for e in await rt.events(rid) if isinstance(e.event, ModelCallFailed)]
    assert view.status is stead.RunStatus.COMPLETED and flaky.calls == 2
    assert [f.code for f in failed] == ["provider_unavailable"]
