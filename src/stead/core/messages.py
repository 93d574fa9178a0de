"""The conversation as stead records it, independent of any provider's wire format.

Provider adapters map these to and from the Anthropic and OpenAI shapes; the run log stores
them as plain JSON. Each message is stored once, in the event that introduced it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from stead.core.canonical import JSON
from stead.core.codec import COUNT, Record, Tagged
from stead.core.codegen import fast_init

_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
_MAX_COUNT = 2**63
"""Counts are stored as 64-bit integers (SQLite INTEGER, PostgreSQL BIGINT range)."""

# -- text the log can hold ---------------------------------------------------------------

_UNSTORABLE = re.compile("[\ud800-\udfff]")
"""Surrogate code points: valid in a Python str (and in JSON as an escape), but not Unicode
scalar values, so not encodable as UTF-8 and not storable in either store."""


def unstorable(text: str) -> bool:
    """True when ``text`` holds a surrogate code point (UTF-8 cannot encode it).

    ``isascii`` is O(1) in CPython, so the common case costs next to nothing."""
    return not text.isascii() and _UNSTORABLE.search(text) is not None


def repair_text(text: str) -> tuple[str, int]:
    """``text`` made storable as UTF-8, and how many characters were replaced.

    A well-formed surrogate pair that reached us as two code points is joined into the
    character it encodes; every lone surrogate becomes U+FFFD (the replacement character).
    Text from outside (a model's reply, a tool's result, an error message) is repaired
    rather than refused: refusing it would leave the run stuck, or run the tool again.
    """
    if not unstorable(text):
        return text, 0
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed, fixed.count("\ufffd") - text.count("\ufffd")


def repair_note(*places: tuple[int, str]) -> str:
    """The note appended to repaired text, so the model (and a person) reads what changed:
    ``places`` are (characters replaced, where) pairs, e.g. ``(1, "in this text")``."""
    total = sum(n for n, _ in places)
    where = ", ".join(f"{n} {w}" for n, w in places)
    return (
        f"[stead: {total} {'character' if total == 1 else 'characters'} that UTF-8 cannot "
        f"hold (lone surrogates) replaced with U+FFFD: {where}]"
    )


@fast_init
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

    def __post_init__(self) -> None:
        # The truth about counts lives here: a negative or non-integer count cannot be
        # built, so it cannot be written and then refused by the reader. Providers clamp
        # what a server sends before they build one. (Four plain counts: one test.)
        a, b = self.input_tokens, self.output_tokens
        c, d = self.cache_creation_input_tokens, self.cache_read_input_tokens
        m = _MAX_COUNT  # chained comparisons: no max()/min() calls on every usage built
        if (
            type(a) is int
            and type(b) is int
            and type(c) is int
            and type(d) is int
            and 0 <= a < m
            and 0 <= b < m
            and 0 <= c < m
            and 0 <= d < m
        ):
            return
        for key in _USAGE_KEYS:
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < _MAX_COUNT:
                raise ValueError(f"usage {key} must be a non-negative integer, got {v!r}")

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
        return USAGE.enc(self)  # type: ignore[no-any-return,misc]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        """Decode; ``ValueError`` for unknown keys or counts that are not whole numbers."""
        return USAGE.dec(data)  # type: ignore[no-any-return]


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call as the model asked for it."""

    id: str
    """The provider's tool call id (``toolu_...``, ``call_...``)."""
    name: str
    """The tool name the model used; may name no registered tool (a model mistake)."""
    arguments: str
    """The raw argument text the model produced; may not even be JSON (a model mistake)."""


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

USAGE: Final = Record(Usage, nodes=dict.fromkeys(_USAGE_KEYS, COUNT), trusted=True)
"""Trusted: its constructor checks every count, so a Usage is well formed by its type."""
TOOL_CALL: Final = Record(ToolCall, label="tool call")
THINKING: Final = Tagged(
    "thinking block", "kind", Record(Thinking, tag="kind"), Record(RedactedThinking, tag="kind")
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """An image or a document in a user message, by reference: its bytes are stored once
    (the store's ``blobs``, keyed by ``digest``) and every message, event and request that
    carries it holds only this, so a long conversation does not copy an image per turn."""

    kind: Literal["image", "document"]
    """What the provider is told it is (a document is Anthropic's PDF block)."""
    media_type: str
    """``image/png``, ``image/jpeg``, ``image/gif``, ``image/webp`` or ``application/pdf``."""
    digest: str
    """``sha256:<hex>`` of the bytes."""
    name: str = ""
    """A file name, for a document (shown to the model by providers that take one)."""


ATTACHMENT: Final = Record(Attachment, label="attachment")


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """Input from the person or program that started the run."""

    role: Literal["user"] = "user"
    """Discriminator."""
    content: str
    attachments: tuple[Attachment, ...] = ()
    """Images and documents sent with the text, by digest (left out of its JSON when none,
    so the digest of every request without one is what it always was)."""


@fast_init
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

    def __post_init__(self) -> None:
        # Every provider and the ScriptedModel build their reply here, so this is the one
        # boundary where a model's text enters: text UTF-8 cannot hold (a lone surrogate,
        # which JSON can spell) is repaired with a note the model reads on its next turn,
        # instead of making the store refuse the reply on every attempt. ASCII is O(1),
        # and a reply all ASCII (most are) needs no more than that.
        try:
            if self.text.isascii() and self.stop_reason.isascii() and not self.thinking:
                for c in self.tool_calls:
                    if not (c.id.isascii() and c.name.isascii() and c.arguments.isascii()):
                        break
                else:
                    return
        except (TypeError, AttributeError):
            pass  # not all strings: the checks below say which
        try:
            clean = (
                not _dirty(self.text)
                and not _dirty(self.stop_reason)
                and not (
                    self.tool_calls
                    and any(
                        _dirty(c.id) or _dirty(c.name) or _dirty(c.arguments)
                        for c in self.tool_calls
                    )
                )
                and not (
                    self.thinking
                    and any(
                        _dirty(getattr(b, "text", ""))
                        or _dirty(getattr(b, "signature", ""))
                        or _dirty(getattr(b, "data", ""))
                        for b in self.thinking
                    )
                )
            )
        except (TypeError, AttributeError):
            return  # not the right types at all: the store's codec refuses it, naming the field
        if not clean:
            _repair_message(self)


def _dirty(value: object) -> bool:
    return isinstance(value, str) and unstorable(value)


def _repair_message(m: AssistantMessage) -> None:
    """Repair every string of a reply in place (it is being constructed) and note where.
    Values of the wrong type are left as they are: the store's codec refuses them."""
    places: list[tuple[int, str]] = []

    def fix(value: Any, where: str) -> Any:
        if not isinstance(value, str):
            return value
        fixed, n = repair_text(value)
        if n:
            places.append((n, where))
        return fixed

    def call(c: Any) -> Any:
        if not isinstance(c, ToolCall):
            return c
        return ToolCall(
            id=fix(c.id, "in a tool call's id"),
            name=fix(c.name, f"in the name of tool call {c.id!r}"),
            arguments=fix(c.arguments, f"in the arguments of tool call {c.id!r}"),
        )

    def block(b: Any) -> Any:
        if isinstance(b, Thinking):
            return Thinking(
                text=fix(b.text, "in a thinking block"),
                signature=fix(b.signature, "in a thinking block's signature"),
            )
        if isinstance(b, RedactedThinking):
            return RedactedThinking(data=fix(b.data, "in a redacted thinking block"))
        return b

    calls = m.tool_calls
    if isinstance(calls, tuple | list):
        object.__setattr__(m, "tool_calls", type(calls)(call(c) for c in calls))
    thinking = m.thinking
    if isinstance(thinking, tuple | list):
        object.__setattr__(m, "thinking", type(thinking)(block(b) for b in thinking))
    object.__setattr__(m, "stop_reason", fix(m.stop_reason, "in the stop reason"))
    text = fix(m.text, "in this text")
    if places and isinstance(text, str):
        note = repair_note(*places)
        text = f"{text}\n\n{note}" if text else note
    object.__setattr__(m, "text", text)


@fast_init
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


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeMessage:
    """A system notice injected into the conversation by the runtime (e.g. a final-turn notice)."""

    role: Literal["notice"] = "notice"
    """Discriminator."""
    content: str
    """The text the model sees as a system/user instruction."""


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage | NoticeMessage


MESSAGE: Final = Tagged(
    "message",
    "role",
    Record(UserMessage, tag="role"),
    # text is written even when empty, as it always was: request digests hash this JSON
    Record(AssistantMessage, tag="role", always=("text",)),
    Record(ToolResultMessage, tag="role"),
    Record(NoticeMessage, tag="role"),
)
"""The one codec of a message: its JSON in the log, in snapshots, and in model requests (whose
digest is over it, so a message's JSON must never change shape without a new version)."""


_MESSAGE_ENCODERS: Final = MESSAGE.encoders


def message_to_json(m: Message) -> dict[str, JSON]:
    """Encode a message as plain JSON (fields at their default left out, its role first)."""
    return _MESSAGE_ENCODERS[type(m)](m)  # type: ignore[no-any-return]


def message_from_json(data: dict[str, Any]) -> Message:
    """Decode a message; ``ValueError`` naming the field on a malformed one (no coercion:
    a number where text belongs is corruption, not something to paper over)."""
    return MESSAGE.dec(data)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSchema:
    """A tool as the model sees it: name, description, JSON schema of its arguments."""

    name: str
    description: str
    """What it does, from the function's docstring."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """JSON schema of the argument object."""
