"""``AnthropicModel``: the Anthropic Messages API, streamed, through the official SDK.

    from stead.providers.anthropic import AnthropicModel
    model = AnthropicModel("claude-sonnet-4-5")          # key from $ANTHROPIC_API_KEY

Needs ``pip install 'stead[anthropic]'``. The wire mapping is in ``_wire_anthropic``; the
call itself (client, stream, abort, progress, translating the SDK's exceptions into
``ProviderError`` / ``ProviderHTTPError`` with stead's stable codes, the SDK's own retries off)
is ``_sdk.SDKCaller``, shared with the OpenAI adapter. This module says what is Anthropic's:
the key, ``max_tokens``, prompt caching, extended thinking, and the ``messages.create`` call.

Extended thinking: ``AnthropicModel(..., thinking={"type": "enabled", "budget_tokens": 2048})``
(``max_tokens`` must exceed the budget). The reply's thinking blocks are recorded with it and
sent back unmodified in later requests, as the API requires when tools are used; their text
is never streamed as progress.
``$ANTHROPIC_BASE_URL`` (read by the SDK) or ``base_url=`` points it at a proxy or gateway.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import anthropic

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
from stead.providers._wire_anthropic import AnthropicReply, failure_code, request_params

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when neither the agent nor the provider sets one (the API requires it)."""

_SDK = SDK.of(anthropic, anthropic.AsyncAnthropic, failure_code)


class AnthropicModel(SDKModel[anthropic.AsyncAnthropic]):
    """A ``ModelProvider`` for one Anthropic model."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        cache: bool = True,
        thinking: Mapping[str, Any] | None = None,
        timeout: float = 600.0,
        deadline: float | None = DEFAULT_DEADLINE,
        client: anthropic.AsyncAnthropic | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``thinking`` is the API's extended-thinking parameter, sent with every request.
        ``timeout`` bounds each read of the stream; ``deadline`` the whole call, stream
        included (a stream that sends only pings ends there, ``deadline_exceeded``; None for
        no bound).
        ``client`` lets you share one configured ``AsyncAnthropic`` (you close it); without
        it each call opens and closes its own, so no connection outlives an event loop."""
        key = resolve_key("anthropic", model, api_key, "ANTHROPIC_API_KEY", client)
        self.model = model
        self.max_tokens = max_tokens
        self.cache = cache
        self.thinking = dict(thinking) if thinking is not None else None
        self._caller = SDKCaller(
            _SDK,
            name="anthropic",
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            client=client,
            clock=clock,
            deadline=deadline,
        )

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"

    def _call(self, request: ModelRequest) -> tuple[OpenStream[anthropic.AsyncAnthropic], Reply]:
        params = fit_params(
            anthropic.resources.messages.AsyncMessages.create,
            request_params(
                request, max_tokens=self.max_tokens, cache=self.cache, thinking=self.thinking
            ),
        )
        return (
            lambda client: client.messages.create(**params, stream=True),
            AnthropicReply(turn_index=request.turn_index),
        )
