"""``OpenAIModel``: OpenAI Chat Completions, or any OpenAI-compatible server, streamed.

    from stead.providers.openai import OpenAIModel
    model = OpenAIModel("gpt-4.1")                                   # key from $OPENAI_API_KEY
    local = OpenAIModel.compatible_server("qwen3", "http://127.0.0.1:8000/v1")  # vLLM...

Needs ``pip install 'stead[openai]'``. The wire mapping is in ``_wire_openai``; the call
itself (client, stream, abort, progress, translating the SDK's exceptions into
``ProviderError`` / ``ProviderHTTPError`` with stead's stable codes, the SDK's own retries off)
is ``_sdk.SDKCaller``, shared with the Anthropic adapter. This module says what is OpenAI's:
keys, the compatible-server differences, and the ``chat.completions.create`` call.
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

from stead.errors import UserError
from stead.providers._base import ModelRequest
from stead.providers._sdk import (
    DEFAULT_DEADLINE,
    SDK,
    OpenStream,
    Reply,
    SDKCaller,
    SDKModel,
    fit_params,
    resolve_key,
)
from stead.providers._wire_openai import (
    MaxTokensField,
    NoticeRole,
    OpenAIReply,
    failure_code,
    request_params,
)

COMPATIBLE_KEY_ENV = "OPENAI_COMPATIBLE_API_KEY"
"""Where an OpenAI-compatible server's key comes from when ``api_key=`` is not given."""

_SDK = SDK.of(openai, openai.AsyncOpenAI, failure_code)


class OpenAIModel(SDKModel[openai.AsyncOpenAI]):
    """A ``ModelProvider`` for one Chat Completions model."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        compatible: bool = False,
        timeout: float = 600.0,
        deadline: float | None = DEFAULT_DEADLINE,
        client: openai.AsyncOpenAI | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``compatible=True`` speaks to a server that is not OpenAI's (``base_url`` needed):
        notices go as marked user messages, ``max_tokens`` is the older field. ``client`` lets
        you share one configured ``AsyncOpenAI`` (you close it). ``timeout`` bounds each read
        of the stream; ``deadline`` the whole call, stream included (a stream of keep-alive
        comments ends there, ``deadline_exceeded``; None for no bound)."""
        if compatible:
            if not base_url and client is None:
                raise UserError(f"an OpenAI-compatible model ({model}) needs a base_url")
            key = api_key or os.environ.get(COMPATIBLE_KEY_ENV) or "not-needed"
        else:
            key = resolve_key("openai", model, api_key, "OPENAI_API_KEY", client)
        self.model = model
        self.compatible = compatible
        self.notice_role: NoticeRole = "user" if compatible else "system"
        self.max_tokens_field: MaxTokensField = (
            "max_tokens" if compatible else "max_completion_tokens"
        )
        self._caller = SDKCaller(
            _SDK,
            name="openai-compatible" if compatible else "openai",
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            client=client,
            clock=clock,
            deadline=deadline,
        )

    @classmethod
    def compatible_server(
        cls, model: str, base_url: str, *, api_key: str | None = None, **kw: Any
    ) -> OpenAIModel:
        """A model served by an OpenAI-compatible server (vLLM, Ollama, LM Studio...)."""
        return cls(model, base_url=base_url, api_key=api_key, compatible=True, **kw)

    def __repr__(self) -> str:
        base_url = self._caller.base_url
        where = f", base_url={base_url!r}" if base_url else ""
        return f"OpenAIModel({self.model!r}{where})"

    def _call(self, request: ModelRequest) -> tuple[OpenStream[openai.AsyncOpenAI], Reply]:
        params = fit_params(
            openai.resources.chat.completions.AsyncCompletions.create,
            request_params(
                request, notice_role=self.notice_role, max_tokens_field=self.max_tokens_field
            ),
        )
        return (
            lambda client: client.chat.completions.create(**params),
            OpenAIReply(turn_index=request.turn_index),
        )
