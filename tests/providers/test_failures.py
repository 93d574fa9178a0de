"""Foreign exceptions and headers translated at the boundary: each one covered."""

from __future__ import annotations

import email.utils
import json

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
    retry_after_seconds,
)

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
