"""ScriptedModel measures only what a request adds to the conversation it saw last; its
answers (the turn it replies to, the usage it estimates) stay those of a fresh measure."""

from __future__ import annotations

import asyncio

from stead.core.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from stead.providers import ModelCall, ModelRequest
from stead.testing import Reply, ScriptedModel

SCRIPT = ["zero", "one", "two"]


def _answer(model: ScriptedModel, messages: tuple[Message, ...]) -> tuple[str, int]:
    request = ModelRequest(model="scripted", system="sys", messages=messages)
    response = asyncio.run(model.complete(ModelCall(request)))
    return response.message.text, response.usage.input_tokens


def _fresh(messages: tuple[Message, ...]) -> tuple[str, int]:
    return _answer(ScriptedModel(SCRIPT), messages)


def test_grown_diverged_and_shortened_conversations_get_the_fresh_answers() -> None:
    user = UserMessage(content="hello there")
    call = ToolCall(id="c1", name="t", arguments="{}")
    said = AssistantMessage(text="", tool_calls=(call,), stop_reason="tool_use")
    result = ToolResultMessage(tool_call_id="c1", name="t", content="a result of some length")
    grown = (user, said, result)
    model = ScriptedModel(SCRIPT)
    assert _answer(model, (user,)) == _fresh((user,)) == ("zero", _fresh((user,))[1])
    assert _answer(model, grown) == _fresh(grown)
    assert _answer(model, grown)[0] == "one"
    # The same first message, then others: not the conversation it remembers.
    other = AssistantMessage(text="a much longer reply than before", stop_reason="end_turn")
    diverged = (user, other, ToolResultMessage(tool_call_id="c1", name="t", content="x"))
    assert _answer(model, diverged) == _fresh(diverged)
    # Shorter than what it saw last (a compacted history): measured again, whole.
    assert _answer(model, (user,)) == _fresh((user,))


def test_a_reply_built_once_is_the_same_message_for_every_run() -> None:
    """The message of a script entry is built once and shared (it is immutable); an entry
    that is a function of the request is asked every time."""
    asked: list[int] = []

    def entry(request: ModelRequest) -> str:
        asked.append(len(request.messages))
        return f"seen {len(request.messages)}"

    model = ScriptedModel([Reply(tool_calls=[("t", {"a": 1})]), entry])
    first = UserMessage(content="one")
    second = UserMessage(content="two")
    replies = [
        asyncio.run(model.complete(ModelCall(ModelRequest(model="m", system="", messages=(m,)))))
        for m in (first, second)
    ]
    assert replies[0].message is replies[1].message
    assert replies[0].message.tool_calls[0].arguments == '{"a": 1}'
    said = replies[0].message
    result = ToolResultMessage(tool_call_id=said.tool_calls[0].id, name="t", content="r")
    texts = [
        asyncio.run(model.complete(ModelCall(ModelRequest(model="m", system="", messages=h))))
        for h in ((first, said, result), (first, said, result, said, result)[:3])
    ]
    assert [t.message.text for t in texts] == ["seen 3", "seen 3"]
    assert asked == [3, 3]
