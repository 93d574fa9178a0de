"""``RequestEncoder`` (one run's requests, each message encoded once) gives exactly what
``ModelRequest.encode`` gives: the request digest is recorded and compared across a crash, so
a faster path that drifted by one byte would make every resumed turn look like a new one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stead.core.messages import (
    AssistantMessage,
    Message,
    NoticeMessage,
    RedactedThinking,
    Thinking,
    ToolCall,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
)
from stead.providers import ModelRequest
from stead.providers._base import RequestEncoder

text = st.text(max_size=40)
messages = st.one_of(
    st.builds(UserMessage, content=text),
    st.builds(NoticeMessage, content=text),
    st.builds(
        ToolResultMessage,
        tool_call_id=st.text(min_size=1, max_size=8),
        name=st.sampled_from(["lookup", "send"]),
        content=text,
        is_error=st.booleans(),
    ),
    st.builds(
        AssistantMessage,
        text=text,
        tool_calls=st.lists(
            st.builds(
                ToolCall,
                id=st.text(min_size=1, max_size=8),
                name=st.sampled_from(["lookup", "send"]),
                arguments=st.sampled_from(["{}", '{"a":1}', '{"q":"é"}']),
            ),
            max_size=3,
        ).map(tuple),
        thinking=st.lists(
            st.one_of(
                st.builds(Thinking, text=text, signature=st.text(max_size=12)),
                st.builds(RedactedThinking, data=st.text(max_size=12)),
            ),
            max_size=2,
        ).map(tuple),
    ),
)
TOOLS = (ToolSchema(name="lookup", description="Look up.", parameters={"type": "object"}),)


def request(conversation: tuple[Message, ...], turn: int) -> ModelRequest:
    return ModelRequest(model="m", system="s", messages=conversation, tools=TOOLS, turn_index=turn)


@settings(max_examples=200)
@given(
    st.lists(st.lists(messages, min_size=1, max_size=4), min_size=1, max_size=6),
    st.data(),
)
def test_growing_and_rewritten_conversations_encode_exactly_like_the_request(
    turns: list[list[Message]], data: st.DataObject
) -> None:
    encoder = RequestEncoder()
    conversation: tuple[Message, ...] = ()
    for i, added in enumerate(turns):
        if conversation and data.draw(st.booleans(), label="rewrite"):
            # Not an extension of the last request: a dropped or replaced message.
            conversation = conversation[:-1]
        conversation = (*conversation, *added)
        req = request(conversation, i)
        assert encoder.encode(req) == req.encode()


def test_equal_but_rebuilt_messages_reuse_the_prefix_and_still_match() -> None:
    encoder = RequestEncoder()
    first = (UserMessage(content="hi"), AssistantMessage(text="yo"))
    encoder.encode(request(first, 0))
    rebuilt = (UserMessage(content="hi"), AssistantMessage(text="yo"), UserMessage(content="x"))
    req = request(rebuilt, 1)
    assert encoder.encode(req) == req.encode()
