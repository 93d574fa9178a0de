"""The seam between the run loop and a model: a provider-neutral request and response.

Adapters (Anthropic, OpenAI, OpenAI-compatible) map these to their wire formats; the run loop
never sees an SDK type. A provider signals failure by raising ``ProviderError`` with one of
the stable codes in ``stead.core.failures``; the runtime decides about retries from the code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from stead._signal import AbortSignal
from stead.core.canonical import digest, plain_canonical_json, sha256_hex
from stead.core.codegen import fast_init
from stead.core.messages import AssistantMessage, Message, ToolSchema, Usage, message_to_json
from stead.core.settings import NO_SETTINGS, ModelSettings


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything a model call sends."""

    model: str
    system: str
    messages: tuple[Message, ...]
    """The conversation, each turn's tool results in call order."""
    tools: tuple[ToolSchema, ...] = ()
    max_output_tokens: int | None = None
    turn_index: int = 0
    settings: ModelSettings = NO_SETTINGS
    """Temperature, tool choice, provider extras... (each adapter maps them to its API)."""
    attachments: Mapping[str, bytes] = field(default_factory=dict, compare=False)
    """The bytes of the messages' attachments by digest, for the provider to send; not part
    of the request's JSON or digest (the messages name each attachment by its digest)."""

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
                "settings": self.settings.to_json(),
            }
        )

    def encode(self, head_digest: str | None = None) -> tuple[dict[str, Any], str]:
        """(plain JSON, digest), encoding the conversation once for both.

        The digest is sha256 over the canonical request and is stable across a crash and a
        resume. Messages hold no floats, so their canonical form takes the fast path; tool
        schemas and settings may, so the head goes through the general encoder.
        """
        messages = [message_to_json(m) for m in self.messages]
        head = head_digest or self.head_digest()
        return _body(self, messages), sha256_hex(head + plain_canonical_json(messages))

    def digest(self) -> str:
        """sha256 over the canonical request (see ``encode``)."""
        return self.encode()[1]


class RequestEncoder:
    """Encodes the successive requests of one run, each message once.

    A run's requests grow by appending: turn N+1 sends turn N's messages plus the reply and
    its results. ``ModelRequest.encode`` re-encodes and re-hashes the whole conversation on
    every turn, which is quadratic in the run's length; this keeps each message's JSON and
    a running sha256 of the canonical prefix, so a turn costs only its new messages. The
    result is byte-for-byte ``request.encode(head)``: when a request does not extend the
    previous one (a reordering, another run), it starts over.

    The head digest (model, system, tools, settings) is taken from the first request; use
    one encoder per agent and run, as the run loop does.
    """

    __slots__ = ("_hasher", "_head", "_json", "_prefix")

    def __init__(self) -> None:
        self._head: str | None = None
        self._prefix: tuple[Message, ...] = ()
        self._json: list[dict[str, Any]] = []
        self._hasher: Any = None

    def encode(self, request: ModelRequest) -> tuple[dict[str, Any], str]:
        """(plain JSON, digest) of ``request``, equal to ``request.encode()``."""
        if self._head is None:
            self._head = request.head_digest()
        messages = request.messages
        done = len(self._prefix)
        if self._hasher is None or messages[:done] != self._prefix:
            self._hasher = hashlib.sha256((self._head + "[").encode("utf-8"))
            self._json, done = [], 0
        hasher, encoded = self._hasher, self._json
        for m in messages[done:]:
            j = message_to_json(m)
            text = plain_canonical_json(j)
            hasher.update((text if not encoded else "," + text).encode("utf-8"))
            encoded.append(j)
        self._prefix = messages
        final = hasher.copy()
        final.update(b"]")
        return _body(request, list(encoded)), final.hexdigest()


def _body(request: ModelRequest, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The plain JSON of a request whose messages are already encoded."""
    return {
        "model": request.model,
        "system": request.system,
        "messages": messages,
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in request.tools
        ],
        "max_output_tokens": request.max_output_tokens,
        "turn_index": request.turn_index,
        "settings": request.settings.to_json(),
    }


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """The model's final answer for one call."""

    message: AssistantMessage
    usage: Usage
    model: str = ""
    """The model that answered (providers may resolve aliases)."""


ProgressCallback = Callable[[str], None]
"""Receives provisional text deltas while a reply streams (lossy, not durable)."""


@fast_init
@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call to make: the request, the signal that aborts it, and where streamed text
    goes. One object, so ``complete``'s signature is declared once (here) and a new
    argument of a call is a field, not an edit of every provider."""

    request: ModelRequest
    signal: AbortSignal = field(default_factory=AbortSignal)
    """Aborting it ends the call at once (``Aborted``)."""
    on_progress: ProgressCallback | None = None
    """Receives the reply's text deltas as they stream, if given."""


@runtime_checkable
class ModelProvider(Protocol):
    """Anything that can answer a ``ModelRequest``."""

    @property
    def model_name(self) -> str:
        """The model this provider calls (recorded with each reply)."""
        ...

    async def complete(self, call: ModelCall) -> ModelResponse:
        """Make one call. Raise ``ProviderError`` with a stable code on failure."""
        ...
