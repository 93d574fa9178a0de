"""Pydantic AI's messages and tool results as the log records them, and back.

What the foreign agent reads back is always built from the log (``stead.foreign``), so these
are the one place the two vocabularies meet: a reply's text and tool calls (with the ids the
log gave them), its usage; a tool call's outcome as the text the model reads.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic_ai.durable_exec import JSON_CODEC, CallToolResult
from pydantic_ai.messages import (
    ModelRequest as PaiRequest,
)
from pydantic_ai.messages import (
    ModelResponse as PaiResponse,
)
from pydantic_ai.messages import (
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from stead.core.canonical import canonical_json
from stead.core.effects import ToolDeferred, ToolFailed, ToolOutcome, ToolSucceeded
from stead.core.events import AssistantMessageRecorded, ToolResultRecorded
from stead.core.messages import AssistantMessage, Message, ToolCall, Usage, UserMessage
from stead.providers import ModelResponse
from stead.tools import serialize_result

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_call": "tool_use"}
_FINISH = {v: k for k, v in _STOP.items()}


def reply_of(response: PaiResponse, model_name: str) -> ModelResponse:
    """A Pydantic AI model response as the reply the log records."""
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    calls = tuple(
        ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str())
        for p in response.parts
        if isinstance(p, ToolCallPart)
    )
    stop = _STOP.get(response.finish_reason or "", "tool_use" if calls else "end_turn")
    u = response.usage
    usage = Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_creation_input_tokens=u.cache_write_tokens,
        cache_read_input_tokens=u.cache_read_tokens,
    )
    message = AssistantMessage(text=text, tool_calls=calls, stop_reason=stop)
    return ModelResponse(message=message, usage=usage, model=response.model_name or model_name)


def response_of(recorded: AssistantMessageRecorded) -> PaiResponse:
    """The recorded reply of a turn as the Pydantic AI response its agent reads."""
    m = recorded.message
    parts: list[Any] = [TextPart(m.text)] if m.text else []
    parts.extend(
        ToolCallPart(tool_name=c.name, args=c.arguments or "{}", tool_call_id=c.id)
        for c in m.tool_calls
    )
    u = recorded.usage
    usage = RequestUsage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_write_tokens=u.cache_creation_input_tokens,
        cache_read_tokens=u.cache_read_input_tokens,
    )
    finish = _FINISH.get(m.stop_reason)
    return PaiResponse(
        parts=parts,
        usage=usage,
        model_name=recorded.model or None,
        finish_reason=finish,  # type: ignore[arg-type]
    )


def outcome_of(result: CallToolResult) -> ToolOutcome:
    """What a Pydantic AI tool call came to, as a stead outcome: a return is the text the
    model reads; ``ModelRetry``, ``ToolFailed`` and argument errors are ``is_error`` results
    the model reads and may correct; ``ApprovalRequired`` / ``CallDeferred`` raised while
    running are a call that did not act and waits on a person (``ToolDeferred``)."""
    data = JSON_CODEC.dump(CallToolResult, result)
    kind = data.get("kind")
    if kind in ("tool_return", "tool_content_result"):
        return ToolSucceeded(content=serialize_result(data.get("result")))
    if kind in ("model_retry", "tool_failed", "run_cancelled"):
        return ToolFailed(failure=str(data.get("message", "")))
    if kind == "validation_error":
        errors = "; ".join(
            f"{'/'.join(str(x) for x in e.get('loc', []))}: {e.get('msg', '')}"
            for e in data.get("errors", [])
        )
        return ToolFailed(failure=f"{data.get('title', 'arguments')}: {errors}")
    # ApprovalRequired / CallDeferred raised inside the tool: it did not act, and asks a
    # person, for consent (an approval runs it again with ``ctx.tool_call_approved``) or for
    # the call's result, made elsewhere (``rt.answer``). The run waits for that in
    # ``awaiting_approval``; the same run goes on after the decision.
    ask: Literal["approval", "result"] = "approval" if kind == "approval_required" else "result"
    metadata = data.get("metadata")
    return ToolDeferred(ask=ask, reason=canonical_json(metadata) if metadata else "")


def tool_result_of(recorded: ToolResultRecorded) -> CallToolResult:
    """A recorded result as the Pydantic AI tool result its agent reads: the value (JSON
    read back where the text is JSON) or, for an ``is_error`` result, a ``ModelRetry``."""
    payload: dict[str, Any]
    if recorded.is_error:
        payload = {"kind": "model_retry", "message": recorded.content}
    else:
        payload = {"kind": "tool_return", "result": _value(recorded.content)}
    loaded: CallToolResult = JSON_CODEC.load(CallToolResult, payload)
    return loaded


def _value(content: str) -> Any:
    if not content or content[0] not in '{["':
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def history_of(messages: list[Message]) -> list[Any]:
    """Earlier messages of a conversation (user text and assistant text) as Pydantic AI
    message history."""
    out: list[Any] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(PaiRequest(parts=[UserPromptPart(m.content)]))
        elif isinstance(m, AssistantMessage) and m.text and not m.tool_calls:
            out.append(PaiResponse(parts=[TextPart(m.text)]))
    return out
