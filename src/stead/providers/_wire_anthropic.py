"""Our conversation in the Anthropic Messages API's shapes, and its stream back into a reply.

Pure functions over plain dicts (the SDK's events are dumped to dicts first), so every
mapping rule is unit-tested without a network. The connection lives in ``anthropic.py``.

Request mapping:

- ``system`` is a list of one text block; tools carry ``input_schema``.
- The API has no tool or notice role: tool results are ``tool_result`` blocks (with
  ``is_error: true`` for failed, refused or cancelled calls) in the user turn after the
  assistant message that asked for them, placed *before* any text in that turn, as the API
  requires. A ``NoticeMessage`` (a runtime instruction such as the final-turn notice) becomes
  a text block of that user turn, marked ``[system notice]`` so the model can tell it from
  the person's words. Consecutive user-side messages merge into one user turn.
- Assistant tool calls become ``tool_use`` blocks whose ``input`` is the parsed argument
  text; text that is not a JSON object (a model mistake recorded as-is) is carried as
  ``{"_raw_arguments": text}``.
- An assistant turn's extended-thinking blocks go back first (where a reply has them), in
  their order and unmodified: ``{"type": "thinking", "thinking", "signature"}`` and
  ``{"type": "redacted_thinking", "data"}``. The API requires them (signature intact) in the
  turn whose tool calls are being answered, and filters out those of earlier turns itself,
  so every turn sends all it has. Such a turn never ends on a thinking block, so the cache
  breakpoint below never adds a key to one (that would modify it): with neither text nor
  tool calls it ends with the ``EMPTY_TEXT`` stand-in.
- Prompt caching (``cache=True``): ``cache_control: ephemeral`` on the system prompt (which
  covers the tools before it; on the last tool when there is no system prompt), on the last
  block of the newest message (written for the next turn), and on the last block of the
  message that ended the previous request (read back now). Three of the four breakpoints
  the API allows; below the model's minimum cacheable length the API ignores them.

Stream mapping: ``message_start`` (id, model, usage), ``content_block_start`` (text,
tool_use, thinking with empty ``thinking`` and ``signature``, or redacted_thinking with its
whole ``data``), ``content_block_delta`` (``text_delta`` -> answer text and progress,
``input_json_delta`` -> argument text, ``thinking_delta`` -> thinking text, ``signature_delta``
-> the block's signature, sent once before its ``content_block_stop``; like the SDK we keep
the last one), ``content_block_stop``, ``message_delta`` (stop_reason, cumulative usage),
``message_stop``. A stream that ends without ``message_stop`` was cut.

What a server gets wrong (read through ``_lenient``): token counts are clamped to
non-negative ints (unreadable ones are not reported); text that is not a string is made
readable; a ``tool_use`` block without an id gets ``missing_call_id(turn, block index)`` and
one without a name the empty name (the run answers it "unknown tool"); a ``stop_reason``
that is not a string is its text, one we do not know is kept as sent; content blocks and
deltas of types we do not know are skipped; an event without the fields its type needs (or
an index that is not a number) is ``MalformedReply``.

Thinking never reaches progress: ``ProgressCallback`` carries answer text, which subscribers
show and join into the reply as it grows, and reasoning text is not part of the answer.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from stead.core.failures import ModelFailureCode
from stead.core.messages import (
    AssistantMessage,
    Attachment,
    Message,
    NoticeMessage,
    RedactedThinking,
    Thinking,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from stead.core.settings import ModelSettings
from stead.providers._base import ModelRequest, ModelResponse
from stead.providers._failures import (
    IncompleteReply,
    StreamReply,
    error_code,
)
from stead.providers._lenient import count, missing_call_id, text

NOTICE_PREFIX = "[system notice] "
"""Marks a runtime notice inside a user turn."""

EMPTY_TEXT = "(no text)"
"""Stands in for an assistant reply with neither text nor tool calls (the API wants content)."""

_CACHE = {"type": "ephemeral"}

Block = dict[str, Any]
WireMessage = dict[str, Any]


# -- request ----------------------------------------------------------------------------------


def request_params(
    request: ModelRequest,
    *,
    max_tokens: int,
    cache: bool,
    thinking: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``client.messages.create`` (without ``stream``); ``thinking`` is
    the API's extended-thinking parameter, sent as given (the request's settings win)."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_output_tokens or max_tokens,
        "messages": wire_messages(request.messages, request.attachments),
    }
    if thinking is not None:
        params["thinking"] = dict(thinking)
    if request.system:
        params["system"] = [{"type": "text", "text": request.system}]
    if request.tools:
        params["tools"] = [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": t.parameters or {"type": "object", "properties": {}},
            }
            for t in request.tools
        ]
    params.update(settings_params(request.settings, bool(request.tools)))
    if cache:
        _mark_cache(params)
    return params


def settings_params(settings: ModelSettings, has_tools: bool) -> dict[str, Any]:
    """``ModelSettings`` as Messages API parameters. ``tool_choice`` is a block
    (``required`` is ``{"type": "any"}``, a name ``{"type": "tool", "name": ...}``) that also
    carries ``disable_parallel_tool_use`` for ``parallel_tool_calls=False``; both are left out
    of a request without tools, which the API would refuse. ``extra`` goes in the body as is
    (the SDK's ``extra_body``)."""
    params = settings.sampling(stop="stop_sequences")
    if has_tools:
        choice = settings.tool_choice
        block: dict[str, Any] | None = None
        if choice is not None:
            kinds = {"auto": "auto", "none": "none", "required": "any"}
            block = {"type": kinds[choice]} if choice in kinds else {"type": "tool", "name": choice}
        if settings.parallel_tool_calls is False:
            block = {**(block or {"type": "auto"}), "disable_parallel_tool_use": True}
        if block is not None:
            params["tool_choice"] = block
    return settings.with_extra(params)


def wire_messages(
    messages: Sequence[Message], attachments: Mapping[str, bytes] | None = None
) -> list[WireMessage]:
    """Our messages as Anthropic ``messages``: alternating user and assistant turns. A user
    message's attachments (their bytes from ``attachments``, by digest) come before its
    text, as base64 ``image`` and ``document`` blocks."""
    out: list[WireMessage] = []
    results: list[Block] = []
    texts: list[Block] = []

    def flush() -> None:
        if results or texts:
            out.append({"role": "user", "content": [*results, *texts]})
            results.clear()
            texts.clear()

    for m in messages:
        match m:
            case UserMessage():
                texts.extend(_attachment_block(a, attachments) for a in m.attachments)
                texts.append({"type": "text", "text": m.content})
            case NoticeMessage():
                texts.append({"type": "text", "text": NOTICE_PREFIX + m.content})
            case ToolResultMessage():
                block: Block = {
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id,
                    "content": m.content,
                }
                if m.is_error:
                    block["is_error"] = True
                results.append(block)
            case AssistantMessage():
                flush()
                out.append({"role": "assistant", "content": _assistant_blocks(m)})
    flush()
    return out


def _attachment_block(a: Attachment, attachments: Mapping[str, bytes] | None) -> Block:
    source = {"type": "base64", "media_type": a.media_type, "data": base64_of(a, attachments)}
    block: Block = {"type": a.kind, "source": source}
    if a.kind == "document" and a.name:
        block["title"] = a.name
    return block


def base64_of(a: Attachment, attachments: Mapping[str, bytes] | None) -> str:
    """The attachment's bytes as base64; ``ValueError`` when the request lacks them (the
    run loop loads them from the store for every request that refers to one)."""
    data = (attachments or {}).get(a.digest)
    if data is None:
        raise ValueError(f"the request holds no bytes for attachment {a.digest}")
    return base64.b64encode(data).decode("ascii")


def _assistant_blocks(m: AssistantMessage) -> list[Block]:
    blocks: list[Block] = [_thinking_block(b) for b in m.thinking]
    if m.text:
        blocks.append({"type": "text", "text": m.text})
    for call in m.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call)}
        )
    if not m.text and not m.tool_calls:
        blocks.append({"type": "text", "text": EMPTY_TEXT})
    return blocks


def _thinking_block(block: ThinkingBlock) -> Block:
    match block:
        case Thinking():
            return {"type": "thinking", "thinking": block.text, "signature": block.signature}
        case RedactedThinking():
            return {"type": "redacted_thinking", "data": block.data}


def tool_input(call: ToolCall) -> dict[str, Any]:
    """The ``input`` object of a ``tool_use`` block for ``call``'s raw argument text.

    Arguments may spell a lone surrogate as a JSON escape (``"\\ud800"``: valid JSON, stored
    as such); parsed, it is a character the UTF-8 request body cannot hold, and every later
    request of the run would fail. It is sent as U+FFFD instead (only escapes are scanned for).
    """
    if not call.arguments.strip():
        return {}
    try:
        parsed = json.loads(call.arguments)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return {"_raw_arguments": call.arguments}
    if "\\ud" in call.arguments or "\\uD" in call.arguments:
        return _sendable(parsed)  # type: ignore[no-any-return]
    return parsed


def _sendable(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings replaced by U+FFFD (pairs kept)."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_sendable(v) for v in value]
    if isinstance(value, dict):
        return {_sendable(k): _sendable(v) for k, v in value.items()}
    return value


def _mark_cache(params: dict[str, Any]) -> None:
    system = params.get("system")
    tools = params.get("tools")
    if system:
        system[-1]["cache_control"] = _CACHE
    elif tools:
        tools[-1]["cache_control"] = _CACHE
    messages: list[WireMessage] = params["messages"]
    if not messages:
        return
    messages[-1]["content"][-1]["cache_control"] = _CACHE
    # The previous request ended with the message just before the newest assistant turn.
    for i in range(len(messages) - 2, 0, -1):
        if messages[i]["role"] == "assistant":
            messages[i - 1]["content"][-1]["cache_control"] = _CACHE
            break


# -- stream -----------------------------------------------------------------------------------


class AnthropicReply(StreamReply):
    """Accumulates one streamed reply from its raw events (as dicts)."""

    _event_name = "Anthropic stream event"

    def __init__(self, *, turn_index: int = 0) -> None:
        """``turn_index`` names the ids of tool calls sent without one."""
        self._turn_index = turn_index
        self.model = ""
        self.message_id = ""
        self.stop_reason: str | None = None
        self.stopped = False
        self._texts: dict[int, list[str]] = {}
        self._tools: dict[int, dict[str, Any]] = {}
        self._thinking: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, int] = {}

    def _feed(self, event: Mapping[str, Any]) -> str | None:
        kind = event.get("type")
        if kind == "message_start":
            message = event["message"]
            self.message_id = text(message.get("id"))
            self.model = text(message.get("model"))
            self._take_usage(message.get("usage"))
        elif kind == "content_block_start":
            index, block = int(event["index"]), event["content_block"]
            if block["type"] == "text":
                self._texts[index] = [text(block.get("text"))]
                return self._texts[index][0] or None
            if block["type"] == "tool_use":
                start = block.get("input")
                self._tools[index] = {
                    "id": text(block.get("id")) or missing_call_id(self._turn_index, index),
                    "name": text(block.get("name")),
                    "json": [],
                    "start": start if isinstance(start, dict) else {},
                }
            if block["type"] == "thinking":
                self._thinking[index] = {
                    "text": [text(block.get("thinking"))],
                    "signature": text(block.get("signature")),
                }
            if block["type"] == "redacted_thinking":
                self._thinking[index] = {"data": text(block["data"])}
        elif kind == "content_block_delta":
            index, delta = int(event["index"]), event["delta"]
            if delta["type"] == "text_delta":
                piece = text(delta["text"])
                self._texts.setdefault(index, []).append(piece)
                return piece or None
            if delta["type"] == "input_json_delta" and index in self._tools:
                self._tools[index]["json"].append(text(delta["partial_json"]))
            thinking = self._thinking.get(index)
            if thinking is not None and "text" in thinking:  # not a redacted block
                if delta["type"] == "thinking_delta":
                    thinking["text"].append(text(delta["thinking"]))
                elif delta["type"] == "signature_delta":
                    thinking["signature"] = text(delta["signature"])
        elif kind == "message_delta":
            self.stop_reason = text(event["delta"].get("stop_reason")) or self.stop_reason
            self._take_usage(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        # ping, content_block_stop and event types added later carry nothing we keep.
        return None

    def _take_usage(self, usage: object) -> None:
        if isinstance(usage, Mapping):
            for key in _USAGE_KEYS:
                value = count(usage.get(key))
                if value is not None:  # not reported (absent, null, unreadable): keep the last
                    self._usage[key] = value

    def usage(self) -> Usage:
        """Usage reported so far (all of it once the stream completed)."""
        return Usage(
            input_tokens=self._usage.get("input_tokens", 0),
            output_tokens=self._usage.get("output_tokens", 0),
            cache_creation_input_tokens=self._usage.get("cache_creation_input_tokens", 0),
            cache_read_input_tokens=self._usage.get("cache_read_input_tokens", 0),
        )

    def response(self) -> ModelResponse:
        """The final reply; ``IncompleteReply`` if the stream never reached ``message_stop``."""
        if not self.stopped:
            raise IncompleteReply("the Anthropic stream ended before message_stop")
        text = "".join("".join(self._texts[i]) for i in sorted(self._texts))
        calls = tuple(
            ToolCall(id=t["id"], name=t["name"], arguments=_arguments(t))
            for _, t in sorted(self._tools.items())
        )
        thinking = tuple(_thinking(t) for _, t in sorted(self._thinking.items()))
        stop = self.stop_reason or ("tool_use" if calls else "end_turn")
        return ModelResponse(
            message=AssistantMessage(
                text=text, tool_calls=calls, stop_reason=stop, thinking=thinking
            ),
            usage=self.usage(),
            model=self.model,
        )


_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _thinking(block: Mapping[str, Any]) -> ThinkingBlock:
    if "data" in block:
        return RedactedThinking(data=block["data"])
    return Thinking(text="".join(block["text"]), signature=block["signature"])


def _arguments(tool: Mapping[str, Any]) -> str:
    raw = "".join(tool["json"])
    if raw:
        return raw
    return json.dumps(tool["start"], separators=(",", ":"), ensure_ascii=False)


# -- failures ---------------------------------------------------------------------------------

_ERROR_TYPES: Mapping[str, ModelFailureCode] = {
    "invalid_request_error": "bad_request",
    "not_found_error": "bad_request",
    "request_too_large": "bad_request",
    "authentication_error": "authentication_failed",
    "permission_error": "authentication_failed",
    "billing_error": "billing",
    "rate_limit_error": "rate_limited",
    "api_error": "provider_unavailable",
    "overloaded_error": "provider_unavailable",
    "timeout_error": "deadline_exceeded",
}


def failure_code(status: int | None, body: object, message: str = "") -> ModelFailureCode:
    """The stable code for an Anthropic error: by HTTP status when the request was refused,
    by ``error.type`` for an ``error`` event inside a 200 stream."""
    return error_code(status, body, message, _ERROR_TYPES, ("type",))
