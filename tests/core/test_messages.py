"""An assistant message's extended-thinking blocks in the log: their JSON, a log written before
they existed, and rows that are corrupt."""

from __future__ import annotations

from typing import Any

import pytest

from stead.core.event_codec import decode, encode
from stead.core.events import AssistantMessageRecorded
from stead.core.messages import (
    AssistantMessage,
    RedactedThinking,
    Thinking,
    ToolCall,
    Usage,
    message_from_json,
    message_to_json,
)

THOUGHT = Thinking(
    text='Order 42: look it up.\n"quoted" é ∑ \U0001f600', signature="EqQBCgIYAh+/=="
)
REDACTED = RedactedThinking(data="EmwKAhgBEgy3va3pzix/LafPsn4a")
REPLY = AssistantMessage(
    text="",
    tool_calls=(ToolCall(id="toolu_1", name="lookup", arguments='{"order_id": 42}'),),
    stop_reason="tool_use",
    thinking=(THOUGHT, REDACTED),
)


def test_the_blocks_json_is_pinned_in_order() -> None:
    assert message_to_json(REPLY)["thinking"] == [
        {"kind": "thinking", "text": THOUGHT.text, "signature": "EqQBCgIYAh+/=="},
        {"kind": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
    ]
    assert message_from_json(message_to_json(REPLY)) == REPLY


def test_a_reply_without_thinking_is_encoded_as_before() -> None:
    plain = AssistantMessage(text="hi", stop_reason="tool_use")
    assert message_to_json(plain) == {"role": "assistant", "text": "hi", "stop_reason": "tool_use"}


def test_an_assistant_message_row_written_before_thinking_existed_still_decodes() -> None:
    old_row = {
        "turn_index": 0,
        "message": {
            "role": "assistant",
            "text": "",
            "tool_calls": [{"id": "toolu_1", "name": "lookup", "arguments": "{}"}],
            "stop_reason": "tool_use",
        },
        "usage": {"input_tokens": 10},
    }
    event = decode("assistant_message", 1, old_row)
    assert isinstance(event, AssistantMessageRecorded)
    assert event.message.thinking == ()
    assert encode(event) == ("assistant_message", 1, old_row)  # and writes back the same row


def test_thinking_round_trips_through_the_event_codec() -> None:
    event = AssistantMessageRecorded(turn_index=3, message=REPLY, usage=Usage(output_tokens=9))
    kind, version, data = encode(event)
    decoded = decode(kind, version, data)
    assert decoded == event
    assert isinstance(decoded, AssistantMessageRecorded)
    assert decoded.message.thinking == (THOUGHT, REDACTED)


@pytest.mark.parametrize(
    "thinking",
    [
        "not a list",
        [{"kind": "thinking", "text": "t"}],  # no signature
        [{"kind": "thinking", "text": "t", "signature": 7}],
        [{"kind": "redacted_thinking"}],
        [{"kind": "interleaved", "data": "x"}],
        ["a string"],
    ],
    ids=["not-a-list", "no-signature", "signature-int", "no-data", "unknown-kind", "not-object"],
)
def test_a_corrupt_thinking_block_is_refused_naming_the_field(thinking: Any) -> None:
    row = {
        "turn_index": 0,
        "message": {"role": "assistant", "text": "", "thinking": thinking},
        "usage": {},
    }
    with pytest.raises(ValueError, match="field 'message'"):
        decode("assistant_message", 1, row)
