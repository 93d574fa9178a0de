"""Anthropic extended thinking carried across turns.

With thinking on, a tool-using turn's next request must carry that turn's ``thinking`` and
``redacted_thinking`` blocks back unmodified (signature intact), or the API refuses it. These
tests stream such blocks from the local wire server through the official SDK and check that
they are recorded with the reply, survive the SQLite log and a worker killed mid-run, go back
verbatim (first in their assistant turn), never show up as progress text, and leave the
request digest of runs without thinking exactly what it was.
"""

from __future__ import annotations

import asyncio
import json
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_crash_mid_stream import RUN_ID, read_frames, spawn
from test_runs import lookup_order, notify
from wire_server import WireServer
from wire_shapes import anthropic_events, anthropic_stream

import stead
from stead.core.event_codec import decode, encode
from stead.core.events import AssistantMessageRecorded
from stead.core.messages import (
    AssistantMessage,
    NoticeMessage,
    RedactedThinking,
    Thinking,
    ToolCall,
    ToolResultMessage,
    ToolSchema,
    Usage,
    UserMessage,
)
from stead.core.progress import ProgressFrame
from stead.core.settings import ModelSettings
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.providers import _wire_openai as wire_openai
from stead.providers._wire_anthropic import EMPTY_TEXT, AnthropicReply, request_params
from stead.providers.anthropic import AnthropicModel
from stead.testing import assert_valid_history

# What a real signature looks like (base64, with the characters a careless re-encoding breaks),
# and reasoning text with quotes, escapes, a line separator and characters beyond the BMP.
SIGNATURE = "EqQBCkYIBxgCIkB3Wm9pZ1+/aGFsZg==/Zm9v+YmFy=="
THOUGHT = ('The user wants order 42.\n"lookup_order" takes an int \\ not a string', " é∑\u2028😀")
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFpHxkSH+3p8aQAAsiIwLUk5V4/Z0Vhf=="
THOUGHT_2 = (["Shipped. Tell on-call."], "ErUBCkYIBxgCIkAz/second+sig==")

SIGNED = {"type": "thinking", "thinking": "".join(THOUGHT), "signature": SIGNATURE}
SIGNED_2 = {"type": "thinking", "thinking": THOUGHT_2[0][0], "signature": THOUGHT_2[1]}
SEALED = {"type": "redacted_thinking", "data": REDACTED}


def _events(raw: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(chunk.decode().split("data: ", 1)[1]) for chunk in raw]


# -- the wire mapping, pure ------------------------------------------------------------------


def test_streamed_thinking_is_kept_in_order_and_never_shown_as_progress() -> None:
    reply = AnthropicReply()
    shown = []
    raw = anthropic_events(
        ["Checking."],
        [("toolu_1", "lookup_order", ['{"order_id": 42}'])],
        thinking=[(THOUGHT, SIGNATURE), REDACTED],
    )
    for event in _events(raw):
        delta = reply.feed(event)
        if delta:
            shown.append(delta)
    message = reply.response().message
    assert shown == ["Checking."]  # the reasoning is not answer text
    assert message.text == "Checking."
    assert message.thinking == (
        Thinking(text="".join(THOUGHT), signature=SIGNATURE),
        RedactedThinking(data=REDACTED),
    )
    assert message.tool_calls == (
        ToolCall(id="toolu_1", name="lookup_order", arguments='{"order_id": 42}'),
    )


def test_thinking_goes_back_first_and_verbatim_and_a_cache_mark_never_lands_on_it() -> None:
    thought = Thinking(text="".join(THOUGHT), signature=SIGNATURE)
    calls = (ToolCall(id="toolu_1", name="lookup_order", arguments='{"order_id": 42}'),)
    request = ModelRequest(
        model="claude-sonnet-4-6",
        system="You help.",
        messages=(
            UserMessage(content="Where is order 42?"),
            AssistantMessage(
                text="Checking.",
                tool_calls=calls,
                stop_reason="tool_use",
                thinking=(thought, RedactedThinking(data=REDACTED)),
            ),
            ToolResultMessage(tool_call_id="toolu_1", name="lookup_order", content="shipped"),
            # a reply cut off while still thinking: nothing but the thinking block
            AssistantMessage(stop_reason="max_tokens", thinking=(thought,)),
        ),
    )
    messages = request_params(request, max_tokens=100, cache=True)["messages"]
    assert messages[1]["content"] == [
        SIGNED,
        SEALED,
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {"order_id": 42}},
    ]
    # the newest message is cache-marked on its last block: the stand-in text, not the thinking
    assert messages[3]["content"] == [
        SIGNED,
        {"type": "text", "text": EMPTY_TEXT, "cache_control": {"type": "ephemeral"}},
    ]


def test_the_thinking_parameter_is_sent_as_given_and_a_requests_settings_win() -> None:
    enabled = {"type": "enabled", "budget_tokens": 2048}
    request = ModelRequest(model="m", system="", messages=(UserMessage(content="q"),))
    assert "thinking" not in request_params(request, max_tokens=10, cache=False)
    assert request_params(request, max_tokens=10, cache=False, thinking=enabled)["thinking"] == (
        enabled
    )
    off = replace(request, settings=ModelSettings(extra={"thinking": {"type": "disabled"}}))
    params = request_params(off, max_tokens=10, cache=False, thinking=enabled)
    # extra_body is merged into the JSON body last, by the SDK: the request's setting wins
    assert params["extra_body"]["thinking"] == {"type": "disabled"}


def test_the_openai_mapping_ignores_thinking() -> None:
    calls = (ToolCall(id="call_1", name="lookup_order", arguments='{"order_id": 42}'),)
    plain = AssistantMessage(text="Checking.", tool_calls=calls, stop_reason="tool_use")
    thinking = AssistantMessage(
        text="Checking.",
        tool_calls=calls,
        stop_reason="tool_use",
        thinking=(Thinking(text="hm", signature=SIGNATURE), RedactedThinking(data=REDACTED)),
    )
    history = (UserMessage(content="q"), NoticeMessage(content="n"))
    for role in ("system", "user"):
        sent = wire_openai.wire_messages("s", (*history, thinking), notice_role=role)
        assert sent == wire_openai.wire_messages("s", (*history, plain), notice_role=role)
        assert SIGNATURE not in json.dumps(sent) and REDACTED not in json.dumps(sent)


# -- a whole run: recorded, sent back, never progress ----------------------------------------


async def test_a_multi_turn_tool_run_sends_each_turns_thinking_back_byte_for_byte(
    server: WireServer, tmp_path: Path
) -> None:
    server.push(
        anthropic_stream(
            tools=[("toolu_01", "lookup_order", ['{"order_id": 42}'])],
            thinking=[(THOUGHT, SIGNATURE), REDACTED],
        ),
        anthropic_stream(
            "Telling on-call.",
            tools=[("toolu_02", "notify", ['{"to": "on-call", "text": "42 shipped"}'])],
            thinking=[THOUGHT_2],
        ),
        anthropic_stream("Order 42 has shipped; on-call knows."),
    )
    thinking = {"type": "enabled", "budget_tokens": 2048}
    model = AnthropicModel(
        "claude-sonnet-4-6", api_key="k", base_url=server.url, max_tokens=8192, thinking=thinking
    )
    agent = stead.Agent("thinker", model, [lookup_order, notify], system="You help.")
    frames: list[ProgressFrame] = []
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    async with stead.Runtime(store, agents=[agent], on_progress=frames.append) as rt:
        rid = await rt.start(agent, "Where is order 42? Tell on-call.")
        view = await rt.run(rid)
        events = [e.event for e in await rt.events(rid)]

    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "Order 42 has shipped; on-call knows."

    assert all(r.body["thinking"] == thinking for r in server.requests)  # thinking is on
    # turn 2's request carries turn 1's blocks, first in that assistant turn, unmodified
    second = server.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"][:2] == [SIGNED, SEALED]
    assert second[1]["content"][2]["type"] == "tool_use"
    sent = second[1]["content"][0]
    assert sent["signature"].encode() == SIGNATURE.encode()
    assert sent["thinking"].encode() == "".join(THOUGHT).encode()
    assert second[1]["content"][1]["data"].encode() == REDACTED.encode()
    # turn 3's request carries each earlier turn's blocks in its own assistant turn
    third = server.requests[2].body["messages"]
    assert [m["content"][0] for m in third if m["role"] == "assistant"] == [SIGNED, SIGNED_2]

    # recorded durably with the reply it belongs to
    replies = [e for e in events if isinstance(e, AssistantMessageRecorded)]
    assert [r.message.thinking for r in replies] == [
        (Thinking(text="".join(THOUGHT), signature=SIGNATURE), RedactedThinking(data=REDACTED)),
        (Thinking(text=THOUGHT_2[0][0], signature=THOUGHT_2[1]),),
        (),
    ]
    # progress was the answer text alone
    assert "".join(f.text for f in frames) == "Telling on-call.Order 42 has shipped; on-call knows."


# -- a worker killed mid-run: the blocks come back out of SQLite -----------------------------


# Two child processes in turn, each paying stead's and the SDKs' imports, and waits of
# 60 + 30 + 60 s for their steps: on a busy machine the whole outlasts the default 120 s.
@pytest.mark.timeout(240)
async def test_a_worker_killed_after_a_thinking_turn_resends_the_blocks_from_the_log(
    server: WireServer, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    stalled = anthropic_stream("Order 42 ", "has shipped.", stall_after=4)
    server.push(
        anthropic_stream(
            tools=[("toolu_01", "lookup_order", ['{"order_id": 42}'])],
            thinking=[(THOUGHT, SIGNATURE), REDACTED],
        ),
        stalled,  # turn 2, first try: held after its first delta until the worker is killed
        anthropic_stream("Order 42 ", "has shipped."),  # turn 2 again, from a new process
    )

    first = spawn(store, "anthropic", server.url, "start")
    try:
        shown = await asyncio.wait_for(asyncio.to_thread(read_frames, first, "Order 42 "), 60)
        assert stalled.stalled.is_set()
        first.send_signal(signal.SIGKILL)
        _, err = first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == -signal.SIGKILL, err
    assert shown == "Order 42 "

    second = spawn(store, "anthropic", server.url, "run")
    try:  # 120 s: a new process imports stead and the SDK before it runs
        out, err = second.communicate(timeout=120)
    finally:  # not left running past the test (its Popen then warns in a later test)
        if second.poll() is None:
            second.kill()
            second.communicate()
    assert second.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["status"] == "completed"

    # the new process knew the blocks only from the log, and sent exactly what the first did
    assert len(server.requests) == 3
    assert server.requests[1].body["messages"][1]["content"][:2] == [SIGNED, SEALED]
    assert server.requests[2].body == server.requests[1].body
    async with stead.Runtime(store) as rt:
        state = await rt.state(RUN_ID)
    assert state.status is RunStatus.COMPLETED
    assert_valid_history(state)
    first_reply = next(m for m in state.messages if isinstance(m, AssistantMessage))
    assert first_reply.thinking == (
        Thinking(text="".join(THOUGHT), signature=SIGNATURE),
        RedactedThinking(data=REDACTED),
    )


# -- the request digest ----------------------------------------------------------------------

TOOLS = (
    ToolSchema(
        name="lookup_order",
        description="Look up an order by id.",
        parameters={"type": "object", "properties": {"order_id": {"type": "integer"}}},
    ),
)
CALLS = (
    ToolCall(id="toolu_a1", name="lookup_order", arguments='{"order_id": 42}'),
    ToolCall(id="toolu_b2", name="lookup_order", arguments='{"order_id": 7}'),
)


def _request(*, thinking: tuple[Thinking | RedactedThinking, ...] = ()) -> ModelRequest:
    return ModelRequest(
        model="claude-sonnet-4-6",
        system="You help the support team.",
        messages=(
            UserMessage(content="Where are orders 42 and 7? Tell on-call."),
            AssistantMessage(
                text="Looking both up.", tool_calls=CALLS, stop_reason="tool_use", thinking=thinking
            ),
            ToolResultMessage(
                tool_call_id="toolu_a1", name="lookup_order", content='{"status":"shipped"}'
            ),
            ToolResultMessage(
                tool_call_id="toolu_b2", name="lookup_order", content="no order 7", is_error=True
            ),
            NoticeMessage(content="This is your last turn: answer now."),
            AssistantMessage(text="Order 42 has shipped; order 7 does not exist (é)."),
        ),
        tools=TOOLS,
        max_output_tokens=1024,
        turn_index=2,
        settings=ModelSettings(temperature=0.2),
    )


def test_the_digest_of_a_request_without_thinking_is_unchanged() -> None:
    # Computed with the code before thinking existed: a run recorded then resumes under the
    # same digests.
    assert _request().digest() == "cb23d3e3c820462d104e7bb2d1efde0bcd80e85f93e6a6e2183bece20002ceab"


def test_the_digest_covers_the_thinking_and_survives_the_log() -> None:
    thinking = (
        Thinking(text="".join(THOUGHT), signature=SIGNATURE),
        RedactedThinking(data=REDACTED),
    )
    request = _request(thinking=thinking)
    assert request.digest() != _request().digest()  # they are part of what is sent
    changed = (Thinking(text="".join(THOUGHT), signature=SIGNATURE[:-1]), thinking[1])
    assert _request(thinking=changed).digest() != request.digest()

    # the reply as a resumed worker reads it back from a row: the same request, the same digest
    reply = request.messages[1]
    assert isinstance(reply, AssistantMessage)
    row = json.loads(
        json.dumps(encode(AssistantMessageRecorded(turn_index=1, message=reply, usage=Usage())))
    )
    decoded = decode(*row)
    assert isinstance(decoded, AssistantMessageRecorded)
    messages = list(request.messages)
    messages[1] = decoded.message
    assert replace(request, messages=tuple(messages)).digest() == request.digest()
