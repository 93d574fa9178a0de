"""What a caller may put in a run besides its text: earlier messages (``history``) and images
or documents (``Image``, ``Document``), checked before anything is written.

An attachment's bytes are stored once, under their sha256 (``ConversationStore.put_blob``);
the run's messages, its log and every request digest hold only the reference
(``stead.core.messages.Attachment``). The run loop fetches the bytes when it asks a model
(``attachment_bytes``), once per drive.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from stead.core.messages import (
    AssistantMessage,
    Attachment,
    Message,
    NoticeMessage,
    ToolResultMessage,
    UserMessage,
    message_from_json,
)
from stead.errors import StoreError, UserError
from stead.store import ConversationStore, Store

IMAGE_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""Image types both providers take."""
DOCUMENT_TYPES: Final = ("application/pdf",)
"""Document types (Anthropic's document block; OpenAI's file part)."""
MAX_BYTES: Final = 20 * 1024 * 1024
"""The largest attachment taken (the providers' own limits are lower for images)."""

_MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
)


def _sniff(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((t for magic, t in _MAGIC if data.startswith(magic)), None)


@dataclass(frozen=True, slots=True)
class Image:
    """An image for a user message: its bytes, and its type (found from the bytes if not
    given): PNG, JPEG, GIF or WebP."""

    data: bytes
    """The file's bytes."""
    media_type: str | None = None
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``."""


@dataclass(frozen=True, slots=True)
class Document:
    """A PDF for a user message (Anthropic reads it as a document; OpenAI as a file)."""

    data: bytes
    """The file's bytes."""
    name: str = "document.pdf"
    """A file name the model may be shown."""
    media_type: str = "application/pdf"
    """Only ``application/pdf``."""


AttachmentInput = Image | Document | Attachment


def _checked(item: Any, n: int) -> tuple[Literal["image", "document"], str, bytes, str]:
    if isinstance(item, bytes | bytearray):
        raise UserError(
            f"attachment {n} is bare bytes; wrap it: stead.Image(data) or stead.Document(data)"
        )
    if not isinstance(item, Image | Document):
        raise UserError(
            f"attachment {n} is a {type(item).__name__}; pass stead.Image(data) or "
            "stead.Document(data)"
        )
    data = item.data
    if not isinstance(data, bytes | bytearray) or not data:
        raise UserError(f"attachment {n}: data must be the file's bytes (non-empty)")
    if len(data) > MAX_BYTES:
        raise UserError(f"attachment {n} is {len(data)} bytes; the limit is {MAX_BYTES}")
    found = _sniff(bytes(data[:16]))
    kind: Literal["image", "document"] = "image" if isinstance(item, Image) else "document"
    allowed = IMAGE_TYPES if kind == "image" else DOCUMENT_TYPES
    media_type = item.media_type or found
    if media_type is None or media_type not in allowed:
        raise UserError(
            f"attachment {n}: {kind}s of type {media_type or 'unknown'!r} are not supported; "
            f"send one of {', '.join(allowed)}"
            + ("" if kind == "document" else " (convert it, e.g. with Pillow)")
        )
    if found is not None and found != media_type:
        raise UserError(
            f"attachment {n} says it is {media_type} but its bytes are {found}; pass the "
            "right media_type (or none, to have it found from the bytes)"
        )
    name = item.name if isinstance(item, Document) else ""
    return kind, media_type, bytes(data), name


async def store_attachments(
    store: Store, items: Iterable[AttachmentInput], now: float
) -> tuple[Attachment, ...]:
    """Check every item, then store each one's bytes once; their references, in order.
    An ``Attachment`` (a reference from an earlier message) must name bytes the store has."""
    if isinstance(items, Image | Document | Attachment | bytes | str):
        raise UserError("attachments takes a list: attachments=[stead.Image(data)]")
    listed = list(items)
    refs: list[Attachment | None] = []
    blobs: list[tuple[Literal["image", "document"], str, bytes, str]] = []
    for n, item in enumerate(listed):
        if isinstance(item, Attachment):
            refs.append(item)
        else:
            blobs.append(_checked(item, n))
            refs.append(None)
    if not listed:
        return ()
    chat = chat_store(store)
    known = [r.digest for r in refs if r is not None]
    held = await chat.get_blobs(known)
    missing = [d for d in known if d not in held]
    if missing:
        raise UserError(f"no stored attachment has digest {missing[0]!r}; send its bytes instead")
    made = iter(blobs)
    out: list[Attachment] = []
    for ref in refs:
        if ref is not None:
            out.append(ref)
            continue
        kind, media_type, data, name = next(made)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        await chat.put_blob(digest, media_type, data, now=now)
        out.append(Attachment(kind=kind, media_type=media_type, digest=digest, name=name))
    return tuple(out)


def chat_store(store: Store) -> ConversationStore:
    """The store as a ``ConversationStore``, or a ``UserError`` for a store without one."""
    if not isinstance(store, ConversationStore):
        raise UserError(
            f"{type(store).__name__} keeps no conversations or attachments; use the SQLite "
            "or PostgreSQL store"
        )
    return store


def history_messages(history: Any) -> tuple[Message, ...]:
    """``history`` as messages, or a ``UserError`` saying what is wrong with it: a list of
    stead messages (``RunView.messages`` of an earlier run) or their JSON dicts, in which
    every tool call of an assistant message has its one result before the next message."""
    if history is None:
        return ()
    if isinstance(history, str | bytes | Mapping) or not isinstance(history, Iterable):
        raise UserError(
            f"history takes a list of messages (stead.UserMessage, stead.AssistantMessage..., "
            f"or dicts like {{'role': 'user', 'content': 'hi'}}), not {type(history).__name__}"
        )
    out: list[Message] = []
    open_calls: dict[str, str] = {}
    for n, item in enumerate(history):
        m = item
        if isinstance(item, Mapping):
            try:
                m = message_from_json(dict(item))
            except (ValueError, TypeError, KeyError) as exc:
                raise UserError(f"history[{n}] is not a message: {exc}") from None
        if not isinstance(m, UserMessage | AssistantMessage | ToolResultMessage | NoticeMessage):
            raise UserError(
                f"history[{n}] is a {type(item).__name__}, not a message; pass "
                "stead.UserMessage(content=...), stead.AssistantMessage(text=...) or a dict "
                "with a 'role'"
            )
        if isinstance(m, ToolResultMessage):
            if open_calls.pop(m.tool_call_id, None) is None:
                raise UserError(
                    f"history[{n}] is a result for tool call {m.tool_call_id!r}, which no "
                    "assistant message before it asked for (or that has a result already)"
                )
        elif open_calls:
            raise UserError(
                f"history[{n}] comes before the results of tool calls "
                f"{sorted(open_calls)}; every call needs its result first"
            )
        if isinstance(m, AssistantMessage):
            open_calls = {c.id: c.name for c in m.tool_calls}
        out.append(m)
    if open_calls:
        raise UserError(f"history ends with tool calls {sorted(open_calls)} without results")
    return tuple(out)


def history_of(messages: Iterable[Message]) -> tuple[Message, ...]:
    """A finished run's conversation as the history of the next message: its notices (to
    that run alone) left out, and anything after a tool call that never got its result (a
    run failed or cancelled mid-turn) cut, so the history is valid for every provider."""
    out: list[Message] = []
    unanswered: set[str] = set()
    cut = None
    for m in messages:
        if isinstance(m, NoticeMessage):
            continue
        if isinstance(m, ToolResultMessage):
            unanswered.discard(m.tool_call_id)
        else:
            if unanswered:
                break
            if isinstance(m, AssistantMessage) and m.tool_calls:
                cut = len(out)
                unanswered = {c.id for c in m.tool_calls}
        out.append(m)
    if unanswered and cut is not None:
        del out[cut:]
    return tuple(out)


def attachment_digests(messages: Iterable[Message]) -> list[str]:
    """Every digest the user messages refer to."""
    return [a.digest for m in messages if isinstance(m, UserMessage) for a in m.attachments]


async def attachment_bytes(store: Store, messages: Iterable[Message]) -> dict[str, bytes]:
    """The bytes of every attachment ``messages`` refer to, by digest (no read without one)."""
    digests = attachment_digests(messages)
    if not digests:
        return {}
    found = await chat_store(store).get_blobs(digests)
    missing = sorted(set(digests) - set(found))
    if missing:
        raise StoreError(f"the bytes of attachment {missing[0]} are not in the store")
    return found


async def checked_history(store: Store, history: Any) -> tuple[Message, ...]:
    """``history_messages``, and every attachment it names held by the store."""
    messages = history_messages(history)
    digests = attachment_digests(messages)
    if digests:
        held = await chat_store(store).get_blobs(digests)
        missing = [d for d in digests if d not in held]
        if missing:
            raise UserError(
                f"history names attachment {missing[0]!r}, which this store does not hold; "
                "send the image itself (stead.Image) in a new message instead"
            )
    return messages
