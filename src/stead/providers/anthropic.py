"""``AnthropicModel``: the Anthropic Messages API, streamed, through the official SDK.

    from stead.providers.anthropic import AnthropicModel
    model = AnthropicModel("claude-sonnet-4-5")          # key from $ANTHROPIC_API_KEY

Needs ``pip install 'stead[anthropic]'``. The wire mapping is in ``_wire_anthropic``; this
module is the connection: client, stream, abort, and translating the SDK's exceptions into
``ProviderError`` / ``ProviderHTTPError`` with stead's stable codes.

The SDK's own retries are off (``max_retries=0``): stead's run loop retries retryable codes
with jittered backoff that honours ``retry-after``, and records every attempt as an event.
``$ANTHROPIC_BASE_URL`` (read by the SDK) or ``base_url=`` points it at a proxy or gateway.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import anthropic

from stead._signal import AbortSignal
from stead.errors import ProviderError, ProviderHTTPError, UserError
from stead.providers._abort import call_abortable
from stead.providers._base import ModelRequest, ModelResponse, ProgressCallback
from stead.providers._failures import code_for_exception, error_text, retry_after_seconds
from stead.providers._wire_anthropic import AnthropicReply, failure_code, request_params

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when neither the agent nor the provider sets one (the API requires it)."""


class AnthropicModel:
    """A ``ModelProvider`` for one Anthropic model."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        cache: bool = True,
        timeout: float = 600.0,
        client: anthropic.AsyncAnthropic | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``client`` lets you share one configured ``AsyncAnthropic`` (you close it); without
        it each call opens and closes its own, so no connection outlives an event loop."""
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if client is None and not key:
            raise UserError(
                f"no API key for anthropic:{model}: set ANTHROPIC_API_KEY or pass api_key=..."
            )
        self.model = model
        self.max_tokens = max_tokens
        self.cache = cache
        self._key = key
        self._base_url = base_url
        self._timeout = timeout
        self._client = client
        self._clock = clock

    @property
    def model_name(self) -> str:
        """The model id sent to the API."""
        return self.model

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"

    async def complete(
        self,
        request: ModelRequest,
        *,
        signal: AbortSignal,
        on_progress: ProgressCallback | None = None,
    ) -> ModelResponse:
        """Stream one reply; ``ProviderError`` with a stable code on any failure."""
        params = request_params(request, max_tokens=self.max_tokens, cache=self.cache)
        reply = AnthropicReply()

        async def call() -> ModelResponse:
            if self._client is not None:
                return await self._stream(self._client, params, reply, on_progress)
            async with self._new_client() as client:
                return await self._stream(client, params, reply, on_progress)

        try:
            return await call_abortable(call, signal)
        except ProviderError:
            raise
        except Exception as exc:
            raise self._translate(exc, reply) from exc

    def _new_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self._key,
            base_url=self._base_url,
            max_retries=0,
            timeout=self._timeout,
        )

    async def _stream(
        self,
        client: anthropic.AsyncAnthropic,
        params: dict[str, Any],
        reply: AnthropicReply,
        on_progress: ProgressCallback | None,
    ) -> ModelResponse:
        stream = await client.messages.create(**params, stream=True)
        async with stream:
            async for event in stream:
                delta = reply.feed(event.model_dump(mode="json"))
                if delta and on_progress is not None:
                    on_progress(delta)
        return reply.response()

    def _translate(self, exc: Exception, reply: AnthropicReply) -> ProviderError:
        usage = reply.usage() if reply.usage().total_tokens else None  # None: not known
        if isinstance(exc, anthropic.APIResponseValidationError):
            return ProviderError(f"anthropic: {exc.message}", code="malformed_result", usage=usage)
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            body = exc.body
            message = f"anthropic {status} {error_text(body, exc.message)}"
            code = failure_code(status, body, exc.message)
            if status < 400:  # an error event inside a 200 stream
                return ProviderError(message, code=code, usage=usage)
            return ProviderHTTPError(
                message,
                status=status,
                code=code,
                retry_after=retry_after_seconds(exc.response.headers, self._clock()),
                usage=usage,
            )
        transport = code_for_exception(exc)
        if transport is None:
            raise exc
        return ProviderError(f"anthropic: {type(exc).__name__}: {exc}", code=transport, usage=usage)
