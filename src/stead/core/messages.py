"""The conversation as stead records it, independent of any provider's wire format.

Provider adapters map these to and from the Anthropic and OpenAI shapes; the run log stores
them as plain JSON. Each message is stored once, in the event that introduced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from stead.core.canonical import JSON


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens a model call consumed, in the four kinds providers bill separately."""

    input_tokens: int = 0
    """Uncached prompt tokens."""
    output_tokens: int = 0
    """Generated tokens."""
    cache_creation_input_tokens: int = 0
    """Prompt tokens written to the provider's cache."""
    cache_read_input_tokens: int = 0
    """Prompt tokens served from the provider's cache."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """All tokens of every kind."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )

    def to_json(self) -> dict[str, int]:
        """Only the non-zero counts: most calls have no cache tokens, and logs stay small."""
        full = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }
        return {k: v for k, v in full.items() if v}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        """Decode; ``ValueError`` for unknown keys or counts that are not whole numbers."""
        known = {
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        }
        if not isinstance(data, dict) or set(data) - known:
            raise ValueError(f"usage has unknown keys: {sorted(set(data) - known)}")
        counts = {k: data.get(k, 0) for k in known}
        for k, v in counts.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"usage {k} must be a non-negative integer, got {v!r}")
        return cls(**counts)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call as the model asked for it."""

    id: str
    """The provider's tool call id (``toolu_...``, ``call_...``)."""
    name: str
    """The tool name the model used; may name no registered tool (a model mistake)."""
    arguments: str
    """The raw argument text the model produced; may not even be JSON (a model mistake)."""

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolCall:
        """Decode; ``ValueError`` unless id, name and arguments are strings."""
        return cls(id=_str(data, "id"), name=_str(data, "name"), arguments=_str(data, "arguments"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Thinking:
    """One block of the model's extended thinking, with the provider's signature over it."""

    kind: Literal["thinking"] = "thinking"
    """Discriminator."""
    text: str
    """The reasoning text, as streamed; never part of the answer."""
    signature: str
    """Opaque token the provider checks when the block is sent back; kept byte for byte."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RedactedThinking:
    """A block of extended thinking the provider encrypted: nothing readable, only its data."""

    kind: Literal["redacted_thinking"] = "redacted_thinking"
    """Discriminator."""
    data: str
    """Opaque encrypted content, kept byte for byte."""


ThinkingBlock: TypeAlias = Thinking | RedactedThinking


def thinking_to_json(block: ThinkingBlock) -> dict[str, JSON]:
    """Encode one thinking block as plain JSON."""
    match block:
        case Thinking():
            return {"kind": "thinking", "text": block.text, "signature": block.signature}
        case RedactedThinking():
            return {"kind": "redacted_thinking", "data": block.data}


def thinking_from_json(data: dict[str, Any]) -> ThinkingBlock:
    """Decode one thinking block; ``ValueError`` naming the field on a malformed one."""
    kind = _str(data, "kind")
    if kind == "thinking":
        return Thinking(text=_str(data, "text"), signature=_str(data, "signature"))
    if kind == "redacted_thinking":
        return RedactedThinking(data=_str(data, "data"))
    raise ValueError(f"unknown thinking block kind {kind!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """Input from the person or program that started the run."""

    role: Literal["user"] = "user"
    """Discriminator."""
    content: str
    """The text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """The model's final reply for one turn: text and the tool calls it asks for."""

    role: Literal["assistant"] = "assistant"
    """Discriminator."""
    text: str = ""
    """Visible text (may be empty when the reply is only tool calls)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls in the order the model gave them."""
    stop_reason: str = "end_turn"
    """Why the model stopped (``end_turn``, ``tool_use``, ``max_tokens``...)."""
    thinking: tuple[ThinkingBlock, ...] = ()
    """The reply's extended-thinking blocks in the order they came, unmodified: a provider
    that issued them (Anthropic) refuses the next request of a tool-using turn without them.
    Empty for providers and models that do not think out loud."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMessage:
    """The result of one tool call, exactly one per call in a valid history."""

    role: Literal["tool"] = "tool"
    """Discriminator."""
    tool_call_id: str
    """The call this answers."""
    name: str
    """The tool's name, repeated because some providers want it."""
    content: str
    """What the model reads."""
    is_error: bool = False
    """True when the call failed, was refused or was cancelled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeMessage:
    """A system notice injected into the conversation by the runtime (e.g. a final-turn notice)."""

    role: Literal["notice"] = "notice"
    """Discriminator."""
    content: str
    """The text the model sees as a system/user instruction."""


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage | NoticeMessage


def message_to_json(m: Message) -> dict[str, JSON]:
    """Encode a message as plain JSON."""
    match m:
        case UserMessage():
            return {"role": "user", "content": m.content}
        case NoticeMessage():
            return {"role": "notice", "content": m.content}
        case AssistantMessage():
            out: dict[str, JSON] = {"role": "assistant", "text": m.text}
            if m.tool_calls:
                out["tool_calls"] = [c.to_json() for c in m.tool_calls]
            if m.stop_reason != "end_turn":
                out["stop_reason"] = m.stop_reason
            if m.thinking:  # absent when empty: older logs and digests stay as they were
                out["thinking"] = [thinking_to_json(b) for b in m.thinking]
            return out
        case ToolResultMessage():
            res: dict[str, JSON] = {
                "role": "tool",
                "tool_call_id": m.tool_call_id,
                "name": m.name,
                "content": m.content,
            }
            if m.is_error:
                res["is_error"] = True
            return res


def _str(data: dict[str, Any], key: str, default: str | None = None) -> str:
    if not isinstance(data, dict):
        raise ValueError("expected an object")
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be a string, got {value!r}")
    return value


def message_from_json(data: dict[str, Any]) -> Message:
    """Decode a message; ``ValueError`` naming the field on a malformed one (no coercion:
    a number where text belongs is corruption, not something to paper over)."""
    role = _str(data, "role")
    if role == "user":
        return UserMessage(content=_str(data, "content"))
    if role == "notice":
        return NoticeMessage(content=_str(data, "content"))
    if role == "assistant":
        calls = data.get("tool_calls", [])
        if not isinstance(calls, list):
            raise ValueError("'tool_calls' must be a list")
        thinking = data.get("thinking", [])  # absent in logs written before it existed
        if not isinstance(thinking, list):
            raise ValueError("'thinking' must be a list")
        return AssistantMessage(
            text=_str(data, "text", ""),
            tool_calls=tuple(ToolCall.from_json(c) for c in calls),
            stop_reason=_str(data, "stop_reason", "end_turn"),
            thinking=tuple(thinking_from_json(b) for b in thinking),
        )
    if role == "tool":
        is_error = data.get("is_error", False)
        if not isinstance(is_error, bool):
            raise ValueError(f"'is_error' must be a boolean, got {is_error!r}")
        return ToolResultMessage(
            tool_call_id=_str(data, "tool_call_id"),
            name=_str(data, "name"),
            content=_str(data, "content"),
            is_error=is_error,
        )
    raise ValueError(f"unknown message role {role!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSchema:
    """A tool as the model sees it: name, description, JSON schema of its arguments."""

    name: str
    """Tool name."""
    description: str
    """What it does, from the function's docstring."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """JSON schema of the argument object."""
