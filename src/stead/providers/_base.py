"""The seam between the run loop and a model: a provider-neutral request and response.

Adapters (Anthropic, OpenAI, OpenAI-compatible) map these to their wire formats; the run loop
never sees an SDK type. A provider signals failure by raising ``ProviderError`` with one of
the stable codes in ``stead.core.failures``; the runtime decides about retries from the code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from stead._signal import AbortSignal
from stead.core.canonical import digest, plain_canonical_json, sha256_hex
from stead.core.messages import AssistantMessage, Message, ToolSchema, Usage, message_to_json


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything a model call sends."""

    model: str
    """Model name as the provider knows it."""
    system: str
    """System prompt."""
    messages: tuple[Message, ...]
    """The conversation, each turn's tool results in call order."""
    tools: tuple[ToolSchema, ...] = ()
    """Tools the model may call."""
    max_output_tokens: int | None = None
    """Cap on generated tokens."""
    turn_index: int = 0
    """Which turn this call is for."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Provider-specific extras (temperature...)."""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (for assignments and inspection)."""
        return self.encode()[0]

    def head_digest(self) -> str:
        """Digest of everything but the conversation: constant for an agent, so a caller that
        makes many requests computes it once and passes it to ``encode``."""
        return digest(
            {
                "model": self.model,
                "system": self.system,
                "tools": [[t.name, t.description, t.parameters] for t in self.tools],
                "max_output_tokens": self.max_output_tokens,
                "settings": self.settings,
            }
        )

    def encode(self, head_digest: str | None = None) -> tuple[dict[str, Any], str]:
        """(plain JSON, digest), encoding the conversation once for both.

        The digest is sha256 over the canonical request and is stable across a crash and a
        resume. Messages hold no floats, so their canonical form takes the fast path; tool
        schemas and settings may, so the head goes through the general encoder.
        """
        messages = [message_to_json(m) for m in self.messages]
        body = {
            "model": self.model,
            "system": self.system,
            "messages": messages,
            "tools": [
                {"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in self.tools
            ],
            "max_output_tokens": self.max_output_tokens,
            "turn_index": self.turn_index,
            "settings": self.settings,
        }
        head = head_digest or self.head_digest()
        return body, sha256_hex(head + plain_canonical_json(messages))

    def digest(self) -> str:
        """sha256 over the canonical request (see ``encode``)."""
        return self.encode()[1]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """The model's final answer for one call."""

    message: AssistantMessage
    """Text and tool calls."""
    usage: Usage
    """Tokens consumed."""
    model: str = ""
    """The model that answered (providers may resolve aliases)."""


ProgressCallback = Callable[[str], None]
"""Receives provisional text deltas while a reply streams (lossy, not durable)."""


@runtime_checkable
class ModelProvider(Protocol):
    """Anything that can answer a ``ModelRequest``."""

    @property
    def model_name(self) -> str:
        """The model this provider calls (recorded with each reply)."""
        ...

    async def complete(
        self,
        request: ModelRequest,
        *,
        signal: AbortSignal,
        on_progress: ProgressCallback | None = None,
    ) -> ModelResponse:
        """Make one call. Raise ``ProviderError`` with a stable code on failure."""
        ...
