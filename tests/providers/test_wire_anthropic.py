"""The Anthropic wire mapping as pure functions: requests out, stream events in."""

from __future__ import annotations

import json

import pytest
from wire_shapes import anthropic_events

from stead.core.messages import (
    AssistantMessage,
    NoticeMessage,
    ToolCall,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
)
from stead.core.settings import ModelSettings
from stead.providers import ModelRequest
from stead.providers._failures import IncompleteReply, MalformedReply
from stead.providers._wire_anthropic import (
    NOTICE_PREFIX,
    AnthropicReply,
    failure_code,
    request_params,
    wire_messages,
)

CALLS = (
    ToolCall(id="toolu_a", name="lookup", arguments='{"order_id": 42}'),
    ToolCall(id="toolu_b", name="lookup", arguments='{"order_id": 7}'),
)
HISTORY = (
    UserMessage(content="Where are orders 42 and 7?"),
    AssistantMessage(text="Looking both up.", tool_calls=CALLS, stop_reason="tool_use"),
    ToolResultMessage(tool_call_id="toolu_a", name="lookup", content='{"status":"shipped"}'),
    ToolResultMessage(tool_call_id="toolu_b", name="lookup", content="no order 7", is_error=True),
    NoticeMessage(content="This is your last turn: answer now."),
)


def _events(raw: list[bytes]) -> list[dict[str, object]]:
    out = []
    for chunk in raw:
        data = chunk.decode().split("data: ", 1)[1].strip()
        out.append(json.loads(data))
    return out


def test_tool_results_come_first_in_one_user_turn_with_is_error_and_the_notice_after() -> None:
    wire = wire_messages(HISTORY)
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"] == [
        {"type": "text", "text": "Looking both up."},
        {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"order_id": 42}},
        {"type": "tool_use", "id": "toolu_b", "name": "lookup", "input": {"order_id": 7}},
    ]
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": '{"status":"shipped"}'},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": "no order 7",
            "is_error": True,
        },
        {"type": "text", "text": NOTICE_PREFIX + "This is your last turn: answer now."},
    ]


def test_unparseable_arguments_are_carried_not_dropped() -> None:
    bad = AssistantMessage(tool_calls=(ToolCall(id="t", name="x", arguments="{oops"),))
    empty = AssistantMessage(tool_calls=(ToolCall(id="u", name="y", arguments=""),))
    assert wire_messages([UserMessage(content="q"), bad])[1]["content"][0]["input"] == {
        "_raw_arguments": "{oops"
    }
    assert wire_messages([UserMessage(content="q"), empty])[1]["content"][0]["input"] == {}


def test_an_empty_assistant_reply_still_has_content() -> None:
    wire = wire_messages([UserMessage(content="q"), AssistantMessage(text="")])
    assert wire[1]["content"] and wire[1]["content"][0]["text"].strip()


def test_system_tools_settings_and_cache_breakpoints() -> None:
    request = ModelRequest(
        model="claude-sonnet-4-5",
        system="You help.",
        messages=(*HISTORY[:4], AssistantMessage(text="Done."), UserMessage(content="Thanks!")),
        tools=(ToolSchema(name="lookup", description="Look up.", parameters={}),),
        settings=ModelSettings(temperature=0.2),
    )
    params = request_params(request, max_tokens=1000, cache=True)
    assert params["model"] == "claude-sonnet-4-5"
    assert params["max_tokens"] == 1000
    assert params["temperature"] == 0.2
    assert params["system"] == [
        {"type": "text", "text": "You help.", "cache_control": {"type": "ephemeral"}}
    ]
    assert params["tools"] == [
        {
            "name": "lookup",
            "description": "Look up.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    marked = [
        (i, j)
        for i, m in enumerate(params["messages"])
        for j, block in enumerate(m["content"])
        if "cache_control" in block
    ]
    # the newest message (written for next time) and the end of the previous request (read)
    assert marked == [(2, 1), (4, 0)]
    assert len(marked) + 1 <= 4  # the API allows four breakpoints


def test_caching_off_and_no_system_marks_the_last_tool() -> None:
    request = ModelRequest(
        model="m",
        system="",
        messages=(UserMessage(content="hi"),),
        tools=(
            ToolSchema(name="a", description="A", parameters={"type": "object"}),
            ToolSchema(name="b", description="B", parameters={"type": "object"}),
        ),
    )
    assert "cache_control" not in json.dumps(request_params(request, max_tokens=10, cache=False))
    cached = request_params(request, max_tokens=10, cache=True)
    assert "system" not in cached
    assert "cache_control" in cached["tools"][1] and "cache_control" not in cached["tools"][0]


def test_a_streamed_reply_with_parallel_calls_and_usage() -> None:
    reply = AnthropicReply()
    shown = []
    events = anthropic_events(
        ["I'll check ", "both."],
        [
            ("toolu_a", "lookup", ['{"order', '_id": 42}']),
            ("toolu_b", "lookup", ['{"order_id": 7}']),
        ],
        input_tokens=30,
        cache_creation=1200,
        cache_read=800,
        output_tokens=70,
    )
    for event in _events(events):
        delta = reply.feed(event)
        if delta:
            shown.append(delta)
    response = reply.response()
    assert shown == ["I'll check ", "both."]
    assert response.message.text == "I'll check both."
    assert response.message.tool_calls == (
        ToolCall(id="toolu_a", name="lookup", arguments='{"order_id": 42}'),
        ToolCall(id="toolu_b", name="lookup", arguments='{"order_id": 7}'),
    )
    assert response.message.stop_reason == "tool_use"
    assert response.model == "claude-sonnet-4-6"
    u = response.usage
    assert (u.input_tokens, u.output_tokens) == (30, 70)
    assert (u.cache_creation_input_tokens, u.cache_read_input_tokens) == (1200, 800)


def test_a_stream_without_message_stop_is_incomplete_but_keeps_partial_usage() -> None:
    reply = AnthropicReply()
    for event in _events(anthropic_events(["partial"], input_tokens=99))[:4]:
        reply.feed(event)
    with pytest.raises(IncompleteReply):
        reply.response()
    assert reply.usage().input_tokens == 99


def test_a_nonsense_event_is_malformed() -> None:
    with pytest.raises(MalformedReply):
        AnthropicReply().feed({"type": "content_block_delta", "delta": {"type": "text_delta"}})


@pytest.mark.parametrize(
    ("status", "kind", "message", "code"),
    [
        (400, "invalid_request_error", "max_tokens: 10000 > 4096, the maximum", "bad_request"),
        (400, "invalid_request_error", "prompt is too long: 208123 tokens > 200000 maximum",
         "context_length_exceeded"),
        (401, "authentication_error", "invalid x-api-key", "authentication_failed"),
        (402, "billing_error", "credit balance too low", "billing"),
        (403, "permission_error", "no access", "authentication_failed"),
        (404, "not_found_error", "model: claude-9", "bad_request"),
        (413, "request_too_large", "Request exceeds the maximum size", "bad_request"),
        (429, "rate_limit_error", "slow down", "rate_limited"),
        (500, "api_error", "Internal server error", "provider_unavailable"),
        (529, "overloaded_error", "Overloaded", "provider_unavailable"),
        # an error event inside a 200 stream, classified by error.type
        (200, "overloaded_error", "Overloaded", "provider_unavailable"),
        (200, "api_error", "Internal server error", "provider_unavailable"),
        (200, "rate_limit_error", "slow down", "rate_limited"),
        (200, "invalid_request_error", "prompt is too long: 5 tokens > 4 maximum",
         "context_length_exceeded"),
        (200, "something_new", "?", "provider_unavailable"),
    ],
)  # fmt: skip
def test_failure_codes(status: int, kind: str, message: str, code: str) -> None:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    assert failure_code(status, body) == code
