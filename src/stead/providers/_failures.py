"""From a provider's failure to one of stead's stable codes: the parts both adapters share.

HTTP statuses map through ``stead.core.failures.code_for_status``; these helpers add what a
status alone does not say: a context-window overflow hidden in a 400, a ``retry-after``
header, a transport error raised by whichever HTTP library the SDK was built on (``httpx``
or ``httpx2``, matched by class name so neither is imported here), and a reply that cannot
be parsed (invalid JSON or UTF-8, JSON nested too deep to decode, an event we cannot map).
Each is covered by a test in ``tests/providers/test_failures.py``.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from stead.core.failures import ModelFailureCode, code_for_status

# Phrases providers use for "the prompt does not fit": OpenAI ("This model's maximum context
# length is ..."; code context_length_exceeded), Anthropic ("prompt is too long: N tokens > M
# maximum"), vLLM and other OpenAI-compatible servers (the OpenAI wording, or "... exceeds
# the model's context window / max_model_len").
_CONTEXT = re.compile(
    r"context[_ ]length|context window|maximum context|prompt is too long|"
    r"input is too long|too many input tokens|max_model_len|exceeds? the context",
    re.IGNORECASE,
)

_TIMEOUT_CLASSES = frozenset({"TimeoutException", "APITimeoutError"})
_TRANSPORT_CLASSES = frozenset(
    {"TransportError", "NetworkError", "ProtocolError", "APIConnectionError"}
)


class MalformedReply(ValueError):
    """The provider answered with something that is not a valid reply of its API."""


class IncompleteReply(ConnectionError):
    """The stream ended before the provider said the reply was complete (a cut connection)."""


_READ_ERRORS = (LookupError, TypeError, AttributeError, ValueError, ArithmeticError)
"""What reading a streamed event of an unexpected shape raises: a missing key, a value of the
wrong type, a number that does not parse."""


class StreamReply:
    """The base of each wire module's reply accumulator: ``feed`` reads one streamed event
    with the subclass's ``_feed``, and an event it cannot read is a ``MalformedReply`` naming
    it, never a ``KeyError`` from deep inside the adapter."""

    _event_name: ClassVar[str]
    """What the provider calls one streamed event, for the message."""

    def feed(self, event: Mapping[str, Any]) -> str | None:
        """Take one event; returns a text delta to show as progress, if it carried one."""
        try:
            return self._feed(event)
        except _READ_ERRORS as exc:
            raise MalformedReply(
                f"unexpected {self._event_name} {event!r:.500}: {exc!r:.200}"
            ) from exc

    def _feed(self, event: Mapping[str, Any]) -> str | None:
        raise NotImplementedError  # pragma: no cover - every wire module defines it


def error_object(body: object) -> Mapping[str, Any]:
    """The ``error`` object of an error body (``{"error": {...}}``), or the body itself."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        return inner if isinstance(inner, Mapping) else body
    return {}


def error_text(body: object, fallback: str = "") -> str:
    """A short human message from an error body."""
    err = error_object(body)
    kind = err.get("type") or err.get("code") or ""
    message = err.get("message") or (body if isinstance(body, str) else "") or fallback
    return f"{kind}: {message}" if kind else str(message)


def is_context_overflow(body: object, message: str = "") -> bool:
    """Does this error say the prompt is longer than the model's context window?"""
    err = error_object(body)
    if err.get("code") == "context_length_exceeded":
        return True
    details = err.get("details")
    if isinstance(details, Mapping) and "context" in str(details.get("error_code", "")):
        return True
    return bool(_CONTEXT.search(str(err.get("message", "")) or message))


def code_for_http(status: int, body: object, message: str = "") -> ModelFailureCode:
    """The code for an HTTP error status, refined by what its body says."""
    code = code_for_status(status)
    if code == "bad_request" and is_context_overflow(body, message):
        return "context_length_exceeded"
    return code


def error_code(
    status: int | None,
    body: object,
    message: str,
    types: Mapping[str, ModelFailureCode],
    keys: tuple[str, ...],
) -> ModelFailureCode:
    """A provider error's stable code: by HTTP status (refined by the body) when the request
    was refused; for an error inside a stream, a context window overflow wherever the body
    says so, else the first of the error object's fields ``keys`` found in the provider's
    table ``types``, else ``provider_unavailable`` (retryable: an unknown error is assumed
    transient)."""
    if status is not None and status >= 400:
        return code_for_http(status, body, message)
    if is_context_overflow(body, message):
        return "context_length_exceeded"
    err = error_object(body)
    for key in keys:
        code = types.get(str(err.get(key) or ""))
        if code is not None:
            return code
    return "provider_unavailable"


def retry_after_seconds(headers: Mapping[str, str] | None, now: float) -> float | None:
    """Seconds a response asks us to wait: ``retry-after-ms``, then ``retry-after`` as a
    number of seconds or an HTTP date (measured from ``now``, a Unix time). None if absent
    or unreadable; never negative."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        seconds = _number(ms)
        if seconds is not None:
            return max(0.0, seconds / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - now)
    except (TypeError, ValueError, OverflowError):
        return None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def status_in(exc: BaseException) -> int | None:
    """An HTTP error status carried by ``exc`` or by what it wraps: a ``status_code`` or
    ``status`` of its own or of its ``response`` (requests, httpx, aiohttp, the SDKs), on the
    exception or on one it was raised from or during (``__cause__``, ``__context__``).
    A custom provider that wraps its client's 503 in an error of its own is then retried."""
    seen: set[int] = set()
    chain: list[BaseException | None] = [exc]
    while chain:
        e = chain.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        for holder in (e, getattr(e, "response", None)):
            for name in ("status_code", "status"):
                value = getattr(holder, name, None)
                if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
                    return value
        chain += [e.__cause__, e.__context__]
    return None


def failure_code(exc: BaseException) -> ModelFailureCode | None:
    """The stable code of a model call's failure raised by any provider (a custom one's
    too): an HTTP status anywhere in the exception's chain (``status_in``), else a transport
    or parsing failure (``code_for_exception``); None for anything else (a bug)."""
    if isinstance(exc, TimeoutError):
        return "deadline_exceeded"
    status = status_in(exc)
    if status is not None:
        return code_for_http(status, None, str(exc))
    return code_for_exception(exc)


def code_for_exception(exc: BaseException) -> ModelFailureCode | None:
    """The code for a transport or parsing failure; None for anything else (a bug). A
    stream that ended early (``EOFError``, ``asyncio.IncompleteReadError``) is a cut
    connection."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if isinstance(exc, TimeoutError) or names & _TIMEOUT_CLASSES:
        return "deadline_exceeded"
    if isinstance(exc, MalformedReply | UnicodeDecodeError | RecursionError) or (
        "JSONDecodeError" in names
    ):
        # RecursionError: event data nested deeper than the JSON decoder recurses
        # (``[[[[...]]]]``), raised from the SDK's decoding of the event.
        return "malformed_result"
    if isinstance(exc, ConnectionError | OSError | EOFError) or names & _TRANSPORT_CLASSES:
        return "connection_failed"
    return None
