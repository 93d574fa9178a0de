"""``OpenAIModel``: OpenAI Chat Completions, or any OpenAI-compatible server, streamed.

    from stead.providers.openai import OpenAIModel
    model = OpenAIModel("gpt-4.1")                                   # key from $OPENAI_API_KEY
    local = OpenAIModel.compatible_server("qwen3", "http://127.0.0.1:8000/v1")  # vLLM...

Needs ``pip install 'stead[openai]'``. The wire mapping is in ``_wire_openai``; this module is
the connection: client, stream, abort, and translating the SDK's exceptions into
``ProviderError`` / ``ProviderHTTPError`` with stead's stable codes.

The SDK's own retries are off (``max_retries=0``); stead's run loop does the retrying.
``$OPENAI_BASE_URL`` (read by the SDK) or ``base_url=`` points OpenAI at a proxy. An
OpenAI-compatible server never receives ``$OPENAI_API_KEY``: its key is ``api_key=`` or
``$OPENAI_COMPATIBLE_API_KEY`` (most local servers need none).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import openai

from stead._signal import AbortSignal
from stead.errors import ProviderError, ProviderHTTPError, UserError
from stead.providers._abort import call_abortable
from stead.providers._base import ModelRequest, ModelResponse, ProgressCallback
from stead.providers._failures import code_for_exception, error_text, retry_after_seconds
from stead.providers._wire_openai import (
    MaxTokensField,
    NoticeRole,
    OpenAIReply,
    failure_code,
    request_params,
)

COMPATIBLE_KEY_ENV = "OPENAI_COMPATIBLE_API_KEY"
"""Where an OpenAI-compatible server's key comes from when ``api_key=`` is not given."""


class OpenAIModel:
    """A ``ModelProvider`` for one Chat Completions model."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        compatible: bool = False,
        timeout: float = 600.0,
        client: openai.AsyncOpenAI | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``compatible=True`` speaks to a server that is not OpenAI's (``base_url`` needed):
        notices go as marked user messages, ``max_tokens`` is the older field. ``client`` lets
        you share one configured ``AsyncOpenAI`` (you close it)."""
        if compatible:
            if not base_url and client is None:
                raise UserError(f"an OpenAI-compatible model ({model}) needs a base_url")
            key = api_key or os.environ.get(COMPATIBLE_KEY_ENV) or "not-needed"
        else:
            key = api_key or os.environ.get("OPENAI_API_KEY") or ""
            if client is None and not key:
                raise UserError(
                    f"no API key for openai:{model}: set OPENAI_API_KEY or pass api_key=..."
                )
        self.model = model
        self.compatible = compatible
        self.notice_role: NoticeRole = "user" if compatible else "system"
        self.max_tokens_field: MaxTokensField = (
            "max_tokens" if compatible else "max_completion_tokens"
        )
        self._key = key
        self._base_url = base_url
        self._timeout = timeout
        self._client = client
        self._clock = clock

    @classmethod
    def compatible_server(
        cls, model: str, base_url: str, *, api_key: str | None = None, **kw: Any
    ) -> OpenAIModel:
        """A model served by an OpenAI-compatible server (vLLM, Ollama, LM Studio...)."""
        return cls(model, base_url=base_url, api_key=api_key, compatible=True, **kw)

    @property
    def model_name(self) -> str:
        """The model id sent to the server."""
        return self.model

    def __repr__(self) -> str:
        where = f", base_url={self._base_url!r}" if self._base_url else ""
        return f"OpenAIModel({self.model!r}{where})"

    async def complete(
        self,
        request: ModelRequest,
        *,
        signal: AbortSignal,
        on_progress: ProgressCallback | None = None,
    ) -> ModelResponse:
        """Stream one reply; ``ProviderError`` with a stable code on any failure."""
        params = request_params(
            request, notice_role=self.notice_role, max_tokens_field=self.max_tokens_field
        )
        reply = OpenAIReply(turn_index=request.turn_index)

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

    def _new_client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=self._key,
            base_url=self._base_url,
            max_retries=0,
            timeout=self._timeout,
        )

    async def _stream(
        self,
        client: openai.AsyncOpenAI,
        params: dict[str, Any],
        reply: OpenAIReply,
        on_progress: ProgressCallback | None,
    ) -> ModelResponse:
        stream = await client.chat.completions.create(**params)
        async with stream:
            async for chunk in stream:
                delta = reply.feed(chunk.model_dump(mode="json"))
                if delta and on_progress is not None:
                    on_progress(delta)
        return reply.response()

    def _translate(self, exc: Exception, reply: OpenAIReply) -> ProviderError:
        usage = reply.usage() if reply.usage().total_tokens else None  # None: not known
        name = "openai-compatible" if self.compatible else "openai"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            body = exc.body
            return ProviderHTTPError(
                f"{name} {status} {error_text(body, exc.message)}",
                status=status,
                code=failure_code(status, body, exc.message),
                retry_after=retry_after_seconds(exc.response.headers, self._clock()),
                usage=usage,
            )
        if isinstance(exc, openai.APIResponseValidationError):
            return ProviderError(f"{name}: {exc.message}", code="malformed_result", usage=usage)
        if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
            # An error object inside a 200 stream.
            return ProviderError(
                f"{name}: {error_text(exc.body, exc.message)}",
                code=failure_code(None, exc.body, exc.message),
                usage=usage,
            )
        code = code_for_exception(exc)
        if code is None:
            raise exc
        return ProviderError(f"{name}: {type(exc).__name__}: {exc}", code=code, usage=usage)
