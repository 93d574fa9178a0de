"""The Chat Completions wire mapping as pure functions: requests out, chunks in."""

from __future__ import annotations

import pytest
from wire_shapes import openai_chunks

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
from stead.providers._failures import IncompleteReply
from stead.providers._wire_openai import (
    ERROR_PREFIX,
    NOTICE_PREFIX,
    OpenAIReply,
    failure_code,
    request_params,
    wire_messages,
)

CALLS = (
    ToolCall(id="call_a", name="lookup", arguments='{"order_id": 42}'),
    ToolCall(id="call_b", name="lookup", arguments='{"order_id":'),  # the model's mistake
)


def test_tool_calls_results_and_the_error_convention() -> None:
    wire = wire_messages(
        "You help.",
        [
            UserMessage(content="Orders 42 and 7?"),
            AssistantMessage(tool_calls=CALLS, stop_reason="tool_use"),
            ToolResultMessage(tool_call_id="call_a", name="lookup", content="shipped"),
            ToolResultMessage(tool_call_id="call_b", name="lookup", content="bad", is_error=True),
        ],
    )
    assert wire == [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "Orders 42 and 7?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"order_id": 42}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"order_id":'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "shipped"},
        {"role": "tool", "tool_call_id": "call_b", "content": ERROR_PREFIX + "bad"},
    ]


@pytest.mark.parametrize("role", ["system", "user"])
def test_a_notice_waits_for_the_tool_results_it_was_recorded_among(role: str) -> None:
    notice = NoticeMessage(content="Last turn: answer now.")
    wire = wire_messages(
        "",
        [
            UserMessage(content="q"),
            AssistantMessage(tool_calls=CALLS),
            ToolResultMessage(tool_call_id="call_a", name="lookup", content="1"),
            notice,
            ToolResultMessage(tool_call_id="call_b", name="lookup", content="2"),
        ],
        notice_role=role,  # type: ignore[arg-type]
    )
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", role]
    expected = notice.content if role == "system" else NOTICE_PREFIX + notice.content
    assert wire[-1]["content"] == expected


def test_request_params_for_openai_and_compatible_servers() -> None:
    request = ModelRequest(
        model="gpt-4.1",
        system="",
        messages=(UserMessage(content="hi"),),
        tools=(ToolSchema(name="lookup", description="Look up.", parameters={}),),
        max_output_tokens=300,
        settings=ModelSettings(temperature=0),
    )
    params = request_params(request)
    assert params["stream"] is True
    assert params["stream_options"] == {"include_usage": True}
    assert params["max_completion_tokens"] == 300 and "max_tokens" not in params
    assert params["temperature"] == 0
    assert params["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look up.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert params["messages"] == [{"role": "user", "content": "hi"}]
    compatible = request_params(request, max_tokens_field="max_tokens", notice_role="user")
    assert compatible["max_tokens"] == 300 and "max_completion_tokens" not in compatible


def test_a_streamed_reply_with_parallel_calls_and_cached_usage() -> None:
    reply = OpenAIReply()
    shown = []
    chunks = openai_chunks(
        ["Checking", " both."],
        [("call_a", "lookup", ['{"order', '_id": 42}']), ("call_b", "lookup", ['{"order_id": 7}'])],
        prompt_tokens=2000,
        cached_tokens=1536,
        completion_tokens=40,
    )
    for chunk in chunks:
        delta = reply.feed(chunk)
        if delta:
            shown.append(delta)
    response = reply.response()
    assert shown == ["Checking", " both."]
    assert response.message.text == "Checking both."
    assert response.message.tool_calls == (
        ToolCall(id="call_a", name="lookup", arguments='{"order_id": 42}'),
        ToolCall(id="call_b", name="lookup", arguments='{"order_id": 7}'),
    )
    assert response.message.stop_reason == "tool_use"
    u = response.usage
    assert (u.input_tokens, u.cache_read_input_tokens, u.output_tokens) == (464, 1536, 40)
    assert u.cache_creation_input_tokens == 0


def test_fragments_sharing_an_index_in_one_chunk_and_servers_that_omit_ids() -> None:
    # As the SDK's own tests show: name and first argument piece in two entries of one chunk.
    reply = OpenAIReply(turn_index=3)
    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "qwen3"}
    for delta, finish in [
        (
            {
                "tool_calls": [
                    {"index": 0, "type": "function", "function": {"name": "list_files"}},
                    {"index": 0, "function": {"arguments": '{"path"'}},
                ]
            },
            None,
        ),
        ({"tool_calls": [{"index": 0, "function": {"arguments": ': "."}'}}]}, None),
        ({}, "stop"),  # some servers say stop after a tool call
    ]:
        reply.feed({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    response = reply.response()
    assert response.message.tool_calls == (
        ToolCall(id="missing_id_3_0", name="list_files", arguments='{"path": "."}'),
    )
    assert response.message.stop_reason == "tool_use"
    assert response.usage.total_tokens == 0  # this server sent no usage chunk


def test_finish_reasons_and_a_stream_without_one() -> None:
    reply = OpenAIReply()
    reply.feed(openai_chunks(["cut"], finish_reason="length")[1])
    with pytest.raises(IncompleteReply):
        reply.response()
    for chunk in openai_chunks(["long"], finish_reason="length"):
        reply.feed(chunk)
    assert reply.response().message.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("status", "error", "code"),
    [
        (400, {"message": "Invalid 'messages[1]'", "type": "invalid_request_error"}, "bad_request"),
        (400, {"message": "This model's maximum context length is 128000 tokens. However, your "
               "messages resulted in 204308 tokens.", "type": "invalid_request_error",
               "param": "messages", "code": "context_length_exceeded"}, "context_length_exceeded"),
        # vLLM's shape: no code, the wording only
        (400, {"object": "error", "message": "This model's maximum context length is 32768 "
               "tokens. However, you requested 40000 tokens.", "type": "BadRequestError",
               "code": 400}, "context_length_exceeded"),
        (401, {"message": "Incorrect API key provided", "type": "invalid_request_error",
               "code": "invalid_api_key"}, "authentication_failed"),
        (403, {"message": "unsupported_country_region_territory", "type": "request_forbidden"},
         "authentication_failed"),
        (404, {"message": "The model `gpt-9` does not exist", "type": "invalid_request_error",
               "code": "model_not_found"}, "bad_request"),
        (429, {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"},
         "rate_limited"),
        (429, {"message": "You exceeded your current quota", "type": "insufficient_quota",
               "code": "insufficient_quota"}, "billing"),
        (500, {"message": "The server had an error", "type": "server_error"},
         "provider_unavailable"),
        (503, {"message": "Slow down", "type": "server_error"}, "provider_unavailable"),
        # inside a 200 stream: no status
        (None, {"message": "The server had an error", "type": "server_error"},
         "provider_unavailable"),
        (None, {"message": "Rate limit", "type": "rate_limit_error"}, "rate_limited"),
        (None, {"message": "This model's maximum context length is 8192 tokens",
                "type": "invalid_request_error"}, "context_length_exceeded"),
    ],
)  # fmt: skip
def test_failure_codes(status: int | None, error: dict[str, object], code: str) -> None:
    assert failure_code(status, {"error": error}) == code
