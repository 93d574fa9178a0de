"""The providers' real wire shapes, built for the test server.

Anthropic Messages streaming (event names and JSON as the API sends them; compare the SDK's
own fixtures, e.g. ``tests/lib/streaming/fixtures/tool_use_response.txt`` in
anthropic-sdk-python):

    message_start        {"type":"message_start","message":{..."usage":{...}}}
    content_block_start  {"type":"content_block_start","index":0,"content_block":{...}}
    ping                 {"type": "ping"}
    content_block_delta  {"type":"content_block_delta","index":0,"delta":{"type":"text_delta",...}}
    content_block_stop   {"type":"content_block_stop","index":0}
    extended thinking    content_block_start {"type":"thinking","thinking":"","signature":""},
                         deltas {"type":"thinking_delta","thinking":...} then one
                         {"type":"signature_delta","signature":...} just before the stop;
                         content_block_start {"type":"redacted_thinking","data":...}, no deltas
    message_delta        {"type":"message_delta","delta":{"stop_reason":...},"usage":{...}}
    message_stop         {"type":"message_stop"}
    error                {"type":"error","error":{"type":"overloaded_error","message":"..."}}

OpenAI Chat Completions streaming: ``data: {chat.completion.chunk}`` lines, tool calls as
``choices[0].delta.tool_calls[{index, id, type, function: {name, arguments}}]`` fragments, a
``finish_reason``, a last chunk with ``choices: []`` and ``usage``, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from wire_server import Reply

ToolSpec = tuple[str, str, Sequence[str]]
"""(call id, tool name, argument text fragments)"""
ThinkingSpec = tuple[Sequence[str], str] | str
"""(thinking text fragments, signature) for a thinking block; a bare string is the ``data``
of a redacted_thinking block."""


def sse(event: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


# -- Anthropic --------------------------------------------------------------------------------


def anthropic_events(
    text: Sequence[str] = (),
    tools: Sequence[ToolSpec] = (),
    *,
    thinking: Sequence[ThinkingSpec] = (),
    model: str = "claude-sonnet-4-6",
    input_tokens: int = 25,
    output_tokens: int = 15,
    cache_creation: int = 0,
    cache_read: int = 0,
    stop_reason: str | None = None,
    message_id: str = "msg_01XFDUDYJgAACzvnptvVoYEL",
) -> list[bytes]:
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "output_tokens": 1,
        "service_tier": "standard",
    }
    out = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
    ]
    index = 0
    for spec in thinking:  # the model thinks first, then answers
        out.extend(_thinking_events(index, spec))
        index += 1
    if text:
        out.append(
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        out.append(sse("ping", {"type": "ping"}))
        for piece in text:
            out.append(
                sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for call_id, name, fragments in tools:
        out.append(
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": call_id,
                        "name": name,
                        "caller": {"type": "direct"},
                        "input": {},
                    },
                },
            )
        )
        for piece in ["", *fragments]:
            out.append(
                sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    out.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": stop_reason or ("tool_use" if tools else "end_turn"),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


def _thinking_events(index: int, spec: ThinkingSpec) -> list[bytes]:
    def start(block: dict[str, Any]) -> bytes:
        return sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
        )

    def delta(body: dict[str, Any]) -> bytes:
        return sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": body}
        )

    stop = sse("content_block_stop", {"type": "content_block_stop", "index": index})
    if isinstance(spec, str):
        return [start({"type": "redacted_thinking", "data": spec}), stop]
    fragments, signature = spec
    return [
        start({"type": "thinking", "thinking": "", "signature": ""}),
        *(delta({"type": "thinking_delta", "thinking": piece}) for piece in fragments),
        delta({"type": "signature_delta", "signature": signature}),
        stop,
    ]


def anthropic_stream(*text: str, tools: Sequence[ToolSpec] = (), **kw: Any) -> Reply:
    reply_kw = {k: kw.pop(k) for k in ("cut_after", "stall_after", "headers") if k in kw}
    return Reply(events=anthropic_events(text, tools, **kw), **reply_kw)


def anthropic_error(status: int, kind: str, message: str, **headers: str) -> Reply:
    body = {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }
    return Reply(
        status=status, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )


def anthropic_error_event(kind: str, message: str) -> bytes:
    return sse("error", {"type": "error", "error": {"type": kind, "message": message}})


# -- OpenAI -----------------------------------------------------------------------------------


def _chunk(choices: list[dict[str, Any]], model: str, usage: Any = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion.chunk",
        "created": 1741570283,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": "fp_f9f4fb6dbf",
        "choices": choices,
        "usage": usage,
    }


def openai_chunks(
    text: Sequence[str] = (),
    tools: Sequence[ToolSpec] = (),
    *,
    model: str = "gpt-4.1-2025-04-14",
    prompt_tokens: int = 40,
    cached_tokens: int = 0,
    completion_tokens: int = 12,
    finish_reason: str | None = None,
    usage: bool = True,
) -> list[dict[str, Any]]:
    def choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    out = [_chunk(choice({"role": "assistant", "content": "", "refusal": None}), model)]
    for piece in text:
        out.append(_chunk(choice({"content": piece}), model))
    for i, (call_id, name, fragments) in enumerate(tools):
        out.append(
            _chunk(
                choice(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                ),
                model,
            )
        )
        for piece in fragments:
            out.append(
                _chunk(
                    choice({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                    model,
                )
            )
    out.append(_chunk(choice({}, finish_reason or ("tool_calls" if tools else "stop")), model))
    if usage:
        out.append(
            _chunk(
                [],
                model,
                {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                    "prompt_tokens_details": {"cached_tokens": cached_tokens, "audio_tokens": 0},
                    "completion_tokens_details": {
                        "reasoning_tokens": 0,
                        "audio_tokens": 0,
                        "accepted_prediction_tokens": 0,
                        "rejected_prediction_tokens": 0,
                    },
                },
            )
        )
    return out


def openai_events(*args: Any, **kw: Any) -> list[bytes]:
    return [sse(None, c) for c in openai_chunks(*args, **kw)] + [sse(None, "[DONE]")]


def openai_stream(*text: str, tools: Sequence[ToolSpec] = (), **kw: Any) -> Reply:
    reply_kw = {k: kw.pop(k) for k in ("cut_after", "stall_after", "headers") if k in kw}
    return Reply(events=openai_events(text, tools, **kw), **reply_kw)


def openai_error(
    status: int, message: str, kind: str, code: str | None = None, **headers: str
) -> Reply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply(
        status=status, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )
