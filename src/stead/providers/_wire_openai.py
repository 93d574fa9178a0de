"""Our conversation in OpenAI Chat Completions shapes, and its chunk stream back into a reply.

Pure functions over plain dicts, shared by OpenAI itself and OpenAI-compatible servers
(vLLM, Ollama, LM Studio); the connection lives in ``openai.py``.

Request mapping:

- The system prompt is the first message, ``role: system``.
- Assistant tool calls are ``tool_calls`` of ``type: function`` whose ``arguments`` is the
  raw text the model produced, unchanged.
- An assistant message's ``thinking`` blocks (Anthropic's extended thinking, signed for
  Anthropic alone) are not sent: Chat Completions has no field for them, and a history that
  began on Anthropic stays valid without them.
- Tool results are ``role: tool`` messages. Chat Completions has no error flag, so a failed,
  refused or cancelled call's content is prefixed with ``ERROR_PREFIX`` ("ERROR: "): the
  model reads that the call did not succeed, and the prefix is the whole convention.
- A ``NoticeMessage`` is a ``system`` message where it occurs on OpenAI, which accepts system
  messages anywhere. Many open-model chat templates refuse a system message after the first,
  so for OpenAI-compatible servers it is a ``user`` message marked ``[system notice]``.
  Either way it is held back until every tool result of the preceding assistant message has
  been sent: the API wants those results to follow their tool calls directly.
- Usage is requested with ``stream_options: {"include_usage": true}``; it arrives in a last
  chunk whose ``choices`` is empty.

Stream mapping: ``choices[0].delta.content`` -> text and progress;
``choices[0].delta.tool_calls[i]`` -> calls accumulated by ``index`` (the first fragment
carries ``id`` and ``function.name``, later ones ``function.arguments`` pieces);
``finish_reason`` ends the reply; ``usage`` gives ``prompt_tokens`` (of which
``prompt_tokens_details.cached_tokens`` were cache reads), ``completion_tokens``. A stream
that ends with no ``finish_reason`` was cut.

What a server gets wrong (read through ``_lenient``): token counts are clamped to
non-negative ints, and one that is not a number (``"ten"``, ``null``) counts 0 (the reply is
kept; see ``_lenient``); text that is not a string is made readable; a tool call without an
id gets ``missing_call_id(turn, index)``; a ``finish_reason`` we do not know is kept as sent;
a chunk without the fields it needs (a tool call fragment without a numeric ``index``) is
``MalformedReply``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from stead.core import messages as msg
from stead.core.failures import ModelFailureCode
from stead.core.settings import ModelSettings
from stead.providers._base import ModelRequest, ModelResponse
from stead.providers._failures import (
    IncompleteReply,
    StreamReply,
    error_code,
    error_object,
)
from stead.providers._lenient import count, missing_call_id, text
from stead.providers._wire_anthropic import base64_of

ERROR_PREFIX = "ERROR: "
"""Prefixed to the content of a tool result whose ``is_error`` is set."""

NOTICE_PREFIX = "[system notice] "
"""Marks a runtime notice sent with the ``user`` role."""

NoticeRole = Literal["system", "user"]
MaxTokensField = Literal["max_completion_tokens", "max_tokens"]

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

WireMessage = dict[str, Any]


def _user_content(m: msg.UserMessage, attachments: Mapping[str, bytes] | None) -> Any:
    if not m.attachments:
        return m.content
    parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}]
    for a in m.attachments:
        url = f"data:{a.media_type};base64,{base64_of(a, attachments)}"
        if a.kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "file", "file": {"filename": a.name, "file_data": url}})
    return parts


# -- request ----------------------------------------------------------------------------------


def request_params(
    request: ModelRequest,
    *,
    notice_role: NoticeRole = "system",
    max_tokens_field: MaxTokensField = "max_completion_tokens",
    include_usage: bool = True,
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` (streaming)."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": wire_messages(
            request.system,
            request.messages,
            notice_role=notice_role,
            attachments=request.attachments,
        ),
        "stream": True,
    }
    if include_usage:
        params["stream_options"] = {"include_usage": True}
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters or {"type": "object", "properties": {}},
                },
            }
            for t in request.tools
        ]
    if request.max_output_tokens is not None:
        params[max_tokens_field] = request.max_output_tokens
    params.update(settings_params(request.settings, bool(request.tools)))
    return params


def settings_params(settings: ModelSettings, has_tools: bool) -> dict[str, Any]:
    """``ModelSettings`` as Chat Completions parameters: ``stop`` for the stop sequences;
    ``tool_choice`` as the API's strings, a tool's name as ``{"type": "function", ...}``;
    ``parallel_tool_calls``; the last two only with tools (the API refuses them without).
    ``extra`` goes in the body as is (the SDK's ``extra_body``)."""
    params = settings.sampling(stop="stop")
    if has_tools:
        choice = settings.tool_choice
        if choice in ("auto", "none", "required"):
            params["tool_choice"] = choice
        elif choice is not None:
            params["tool_choice"] = {"type": "function", "function": {"name": choice}}
        if settings.parallel_tool_calls is not None:
            params["parallel_tool_calls"] = settings.parallel_tool_calls
    return settings.with_extra(params)


def wire_messages(
    system: str,
    messages: Sequence[msg.Message],
    *,
    notice_role: NoticeRole = "system",
    attachments: Mapping[str, bytes] | None = None,
) -> list[WireMessage]:
    """Our messages as Chat Completions ``messages``. A user message with attachments is a
    list of parts: its text, then each image as an ``image_url`` data URL and each document
    as a ``file`` part (``file_data``, a data URL)."""
    out: list[WireMessage] = []
    if system:
        out.append({"role": "system", "content": system})
    awaiting: set[str] = set()  # tool call ids whose results have not been sent yet
    held: list[WireMessage] = []  # notices waiting for those results

    def release() -> None:
        out.extend(held)
        held.clear()

    for m in messages:
        match m:
            case msg.UserMessage():
                release()
                out.append({"role": "user", "content": _user_content(m, attachments)})
            case msg.NoticeMessage():
                notice = (
                    {"role": "system", "content": m.content}
                    if notice_role == "system"
                    else {"role": "user", "content": NOTICE_PREFIX + m.content}
                )
                held.append(notice)
                if not awaiting:
                    release()
            case msg.AssistantMessage():
                release()
                out.append(_assistant(m))
                awaiting = {c.id for c in m.tool_calls}
            case msg.ToolResultMessage():
                content = ERROR_PREFIX + m.content if m.is_error else m.content
                out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": content})
                awaiting.discard(m.tool_call_id)
                if not awaiting:
                    release()
    release()
    return out


def _assistant(m: msg.AssistantMessage) -> WireMessage:
    msg: WireMessage = {"role": "assistant", "content": m.text or None}
    if m.tool_calls:
        msg["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in m.tool_calls
        ]
    elif not m.text:
        msg["content"] = ""
    return msg


# -- stream -----------------------------------------------------------------------------------


class OpenAIReply(StreamReply):
    """Accumulates one streamed reply from its ``chat.completion.chunk`` objects (as dicts)."""

    _event_name = "chat.completion.chunk"

    def __init__(self, *, turn_index: int = 0) -> None:
        self.model = ""
        self.finish_reason: str | None = None
        self._turn_index = turn_index
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._usage: Mapping[str, Any] | None = None

    def _feed(self, chunk: Mapping[str, Any]) -> str | None:
        self.model = text(chunk.get("model")) or self.model
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._usage = usage
        shown: list[str] = []
        for choice in chunk.get("choices") or ():
            if int(choice.get("index") or 0) != 0:
                continue  # stead asks for one choice; ignore any other
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):
                piece = text(delta.get(key))
                if piece:
                    self._text.append(piece)
                    shown.append(piece)
            for fragment in delta.get("tool_calls") or ():
                self._tool_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = text(choice["finish_reason"])
        return "".join(shown) or None

    def _tool_fragment(self, fragment: Mapping[str, Any]) -> None:
        index = int(fragment["index"])
        call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        if fragment.get("id"):
            call["id"] = text(fragment["id"])
        function = fragment.get("function") or {}
        if function.get("name"):
            call["name"] = text(function["name"])
        if function.get("arguments"):
            call["arguments"].append(text(function["arguments"]))

    def usage(self) -> msg.Usage:
        """Usage from the final usage chunk (zero until it arrives, or if never sent)."""
        u = self._usage or {}
        details = u.get("prompt_tokens_details")
        if not isinstance(details, Mapping):
            details = {}
        cached = count(details.get("cached_tokens")) or 0
        written = count(details.get("cache_write_tokens")) or 0
        prompt = count(u.get("prompt_tokens")) or 0
        return msg.Usage(
            input_tokens=max(0, prompt - cached - written),
            output_tokens=count(u.get("completion_tokens")) or 0,
            cache_creation_input_tokens=written,
            cache_read_input_tokens=cached,
        )

    def response(self) -> ModelResponse:
        """The final reply; ``IncompleteReply`` if no ``finish_reason`` ever arrived."""
        if self.finish_reason is None:
            raise IncompleteReply("the chat completion stream ended without a finish_reason")
        calls = tuple(
            msg.ToolCall(
                # Some compatible servers omit ids; make one that is stable for this turn.
                id=c["id"] or missing_call_id(self._turn_index, i),
                name=c["name"],
                arguments="".join(c["arguments"]),
            )
            for i, c in sorted(self._calls.items())
        )
        stop = _STOP_REASONS.get(self.finish_reason, self.finish_reason)
        if calls and stop == "end_turn":
            stop = "tool_use"  # some servers say "stop" after tool calls
        return ModelResponse(
            message=msg.AssistantMessage(
                text="".join(self._text), tool_calls=calls, stop_reason=stop
            ),
            usage=self.usage(),
            model=self.model,
        )


# -- failures ---------------------------------------------------------------------------------

_ERROR_TYPES: Mapping[str, ModelFailureCode] = {
    "invalid_request_error": "bad_request",
    "authentication_error": "authentication_failed",
    "permission_error": "authentication_failed",
    "insufficient_quota": "billing",
    "rate_limit_exceeded": "rate_limited",
    "rate_limit_error": "rate_limited",
    "server_error": "provider_unavailable",
}


def failure_code(status: int | None, body: object, message: str = "") -> ModelFailureCode:
    """The stable code for an OpenAI error: by HTTP status (refined by the body) when the
    request was refused; by the error object's ``code``/``type`` for an error inside a stream.

    A 429 whose code is ``insufficient_quota`` is an exhausted balance, not a rate limit:
    ``billing``, which retrying does not fix.
    """
    if status == 429 and error_object(body).get("code") == "insufficient_quota":
        return "billing"
    return error_code(status, body, message, _ERROR_TYPES, ("code", "type"))
