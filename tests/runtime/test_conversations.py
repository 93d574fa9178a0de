"""Conversations on the ScriptedModel, on SQLite and PostgreSQL.

A follow-up message is a new run that starts from the conversation before it; messages sent
at once (in one process or several) are answered in order, each seeing the ones before; a
message sent again under its id is answered once; a SIGKILL between ``send`` and the reply
loses nothing. The wire-format versions are in tests/providers/test_chat_wire.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _crash_harness import KILLED
from chat_child import agent as child_agent
from chat_child import echo

import stead
from stead.core.messages import AssistantMessage, ToolResultMessage, UserMessage
from stead.core.states import RunStatus
from stead.testing import Reply, ScriptedModel, assert_valid_history

CHILD = Path(__file__).parent / "chat_child.py"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'chat.db'}"
    else:
        yield request.getfixturevalue("pg_url")


def chat_agent() -> stead.Agent:
    return stead.Agent("chat", ScriptedModel([echo] * 64), [])


async def test_a_follow_up_is_answered_from_the_whole_conversation(url: str) -> None:
    a = chat_agent()
    async with stead.Runtime(url, agents=[a]) as rt:
        first = await rt.send("c-1", "Where is order 42?", agent=a)
        assert first.output == "answer to 'Where is order 42?' after 0 messages, 0 answers"
        second = await rt.send("c-1", "and the zip code?")  # the one-liner
        assert second.run_id != first.run_id
        assert second.status is RunStatus.COMPLETED
        assert second.output == "answer to 'and the zip code?' after 1 messages, 1 answers"
        assert second.conversation_id == "c-1"
        # typed history out: the first exchange, then this one
        assert second.messages == (
            UserMessage(content="Where is order 42?"),
            AssistantMessage(text=first.output),
            UserMessage(content="and the zip code?"),
            AssistantMessage(text=second.output),
        )
        # a run id continues its conversation too
        third = await rt.send(first.run_id, "thanks")
        assert third.output == "answer to 'thanks' after 2 messages, 2 answers"
        listed = await rt.conversation("c-1")
        assert [e.run_id for e in listed] == [first.run_id, second.run_id, third.run_id]
        assert [e.position for e in listed] == [0, 1, 2]
        # the runs are grouped by the conversation, as their session
        assert {(await rt.store.get_run(e.run_id)).session_id for e in listed} == {"c-1"}


async def test_a_run_started_on_its_own_opens_a_conversation(url: str) -> None:
    a = chat_agent()
    async with stead.Runtime(url, agents=[a]) as rt:
        rid = await rt.start(a, "hello")
        await rt.run(rid)
        view = await rt.send(rid, "again")
        assert view.output == "answer to 'again' after 1 messages, 1 answers"
        assert [e.run_id for e in await rt.conversation(rid)] == [rid, view.run_id]


async def test_history_in_and_messages_out(url: str) -> None:
    tool_turn = [
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "call_0", "name": "lookup", "arguments": "{}"}],
        },
        {"role": "tool", "tool_call_id": "call_0", "name": "lookup", "content": "shipped"},
        AssistantMessage(text="It shipped."),
    ]
    a = stead.Agent(
        "chat", ScriptedModel([Reply(text="unused")] * 2 + [echo]), []
    )  # turn = answers so far
    async with stead.Runtime(url, agents=[a]) as rt:
        rid = await rt.start(a, "when?", history=tool_turn)
        view = await rt.run(rid)
        assert view.output == "answer to 'when?' after 1 messages, 2 answers"
        assert isinstance(view.messages[2], ToolResultMessage)
        assert view.messages[:4] == (
            UserMessage(content="look it up"),
            AssistantMessage(
                tool_calls=(
                    stead.core.messages.ToolCall(id="call_0", name="lookup", arguments="{}"),
                ),
            ),
            ToolResultMessage(tool_call_id="call_0", name="lookup", content="shipped"),
            AssistantMessage(text="It shipped."),
        )
        assert_valid_history(await rt.state(rid))


@pytest.mark.parametrize(
    ("history", "says"),
    [
        ("hello", "history takes a list of messages"),
        ({"role": "user", "content": "x"}, "history takes a list of messages"),
        ([42], "history[0] is a int, not a message"),
        ([{"role": "robot", "content": "x"}], "history[0] is not a message"),
        ([{"role": "user"}], "history[0] is not a message"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "name": "t", "arguments": ""}]}],
            "history ends with tool calls ['c'] without results",
        ),
        (
            [{"role": "tool", "tool_call_id": "c", "name": "t", "content": "x"}],
            "no assistant message before it asked for",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [{"id": "c", "name": "t", "arguments": ""}]},
                {"role": "user", "content": "x"},
            ],
            "comes before the results of tool calls",
        ),
    ],
)
async def test_a_bad_history_is_a_user_error_and_writes_nothing(
    tmp_path: Path, history: Any, says: str
) -> None:
    a = chat_agent()
    async with stead.Runtime(tmp_path / "h.db", agents=[a]) as rt:
        with pytest.raises(stead.UserError, match=says.replace("[", r"\[").replace("]", r"\]")):
            await rt.start(a, "hi", history=history)
        assert await rt.store.list_runs() == []


async def test_an_unknown_conversation_or_agent_is_a_user_error(tmp_path: Path) -> None:
    a = chat_agent()
    async with stead.Runtime(tmp_path / "u.db", agents=[a]) as rt:
        with pytest.raises(stead.UnknownConversation, match=r"pass the agent: rt.send\("):
            await rt.send("nobody", "hello")
        with pytest.raises(stead.UnknownAgent, match="no agent named 'ghost'"):
            await rt.send("c", "hello", agent="ghost")
        with pytest.raises(stead.UserError, match="the message must be a str"):
            await rt.send("c", 42, agent=a)  # type: ignore[arg-type]
        assert await rt.conversation("nobody") == []
        assert await rt.store.list_runs() == []


async def test_a_message_sent_again_under_its_id_is_answered_once(url: str) -> None:
    a = chat_agent()
    model = a.model
    assert isinstance(model, ScriptedModel)
    async with stead.Runtime(url, agents=[a]) as rt:
        await rt.send("c", "one", agent=a, message_id="m-1")
        sent = await rt.send("c", "two", message_id="m-2")
        calls = model.calls
        again = await rt.send("c", "two", message_id="m-2")  # a retry, e.g. after a timeout
        assert (again.run_id, again.output) == (sent.run_id, sent.output)
        assert model.calls == calls  # not answered twice
        assert len(await rt.conversation("c")) == 2
        with pytest.raises(stead.UserError, match="before with other content"):
            await rt.send("c", "three", message_id="m-2")


async def test_two_messages_sent_at_once_are_ordered_never_interleaved(url: str) -> None:
    """Two Runtimes (as two processes would) send at the same moment: one message is
    answered first, and the other's run starts from it and its answer."""
    a, b = chat_agent(), chat_agent()
    async with stead.Runtime(url, agents=[a]) as one, stead.Runtime(url, agents=[b]) as two:
        await one.send("c", "first", agent=a)
        x, y = await asyncio.gather(one.send("c", "ping"), two.send("c", "pong"))
        entries = await one.conversation("c")
        assert len(entries) == 3
        later, earlier = (x, y) if entries[2].run_id == x.run_id else (y, x)
        assert entries[1].run_id == earlier.run_id
        said = earlier.messages[-2]
        assert isinstance(said, UserMessage)
        assert earlier.output == f"answer to {said.content!r} after 1 messages, 1 answers"
        assert later.messages[: len(earlier.messages)] == earlier.messages
        assert later.output is not None and "after 2 messages, 2 answers" in later.output


def _child(url: str, text: str, mid: str, gate: str = "", crash: str = "") -> Any:
    env = {k: v for k, v in __import__("os").environ.items() if k != "STEAD_CRASH_AT"}
    if crash:
        env["STEAD_CRASH_AT"] = crash
    return subprocess.Popen(
        [sys.executable, str(CHILD), url, "conv", text, mid, gate],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_messages_from_many_processes_at_once_are_all_answered_in_order(
    url: str, tmp_path: Path
) -> None:
    """Three processes send to one conversation at the same moment: the store hands out the
    positions, every message is answered once, and each answer saw exactly the messages
    before it."""
    gate = tmp_path / "go"
    children = [_child(url, f"message {i}", f"m{i}", str(gate)) for i in range(3)]
    gate.touch()
    outs = []
    for p in children:
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err
        outs.append(json.loads(out.splitlines()[-1]))

    async def check() -> None:
        async with stead.Runtime(url, agents=[chat_agent()]) as rt:
            entries = await rt.conversation("conv")
            assert [e.position for e in entries] == [0, 1, 2]
            assert {e.run_id for e in entries} == {o["run_id"] for o in outs}
            for n, e in enumerate(entries):
                view = await rt.get(e.run_id)
                text = e.input["content"]
                assert view.output == f"answer to {text!r} after {n} messages, {n} answers"
                assert len(view.messages) == 2 * (n + 1)

    asyncio.run(check())


async def test_a_message_after_one_waiting_on_a_person_is_kept_until_it_is_decided(
    url: str,
) -> None:
    @stead.tool(effect="non_idempotent", requires_approval=True)
    def refund(cents: int) -> str:
        """Refund."""
        return f"refunded {cents}"

    model = ScriptedModel([Reply(tool_calls=[("refund", {"cents": 5})]), "Refunded.", echo])
    a = stead.Agent("chat", model, [refund])
    async with stead.Runtime(url, agents=[a]) as rt:
        first = await rt.send("c", "refund me", agent=a)
        assert first.status is RunStatus.AWAITING_APPROVAL
        with pytest.raises(stead.ConversationBusy, match="waits on a person: decide it"):
            await rt.send("c", "is it done?", message_id="m-2")
        assert len(await rt.conversation("c")) == 2  # recorded, not lost
        (pending,) = first.approvals
        await rt.approve(first.run_id, pending.tool_call_id, token=pending.token)
        view = await rt.send("c", "is it done?", message_id="m-2")
        assert view.output == "answer to 'is it done?' after 1 messages, 2 answers"


@pytest.mark.parametrize("crash", ["after_message_recorded", "mid_model_call"])
def test_a_second_message_survives_a_sigkill_between_send_and_the_reply(
    url: str, crash: str
) -> None:
    """The sender of the second message is SIGKILLed after the message is recorded (before
    its run exists) or while the model answers it; the message is not lost: sent again under
    its id from a new process, it is answered, once, from the whole conversation."""
    first = _child(url, "first", "m1")
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    killed = _child(url, "second", "m2", crash=crash)
    _, err = killed.communicate(timeout=60)
    assert killed.returncode == KILLED, err

    async def recover() -> None:
        async with stead.Runtime(url, agents=[child_agent], lease_ttl=2.0) as rt:
            entries = await rt.conversation("conv")
            assert [e.message_id for e in entries] == ["m1", "m2"]  # recorded before the kill
            view = await rt.send("conv", "second", message_id="m2")
            assert view.run_id == entries[1].run_id
            assert view.output == "answer to 'second' after 1 messages, 1 answers"
            state = await rt.state(view.run_id)
            replies = [m for m in state.messages if isinstance(m, AssistantMessage)]
            assert len(replies) == 2  # the first answer (history) and this one, once
            assert_valid_history(state)
            third = await rt.send("conv", "third")
            assert third.output == "answer to 'third' after 2 messages, 2 answers"

    asyncio.run(recover())


async def test_a_later_message_answers_an_earlier_one_left_unanswered(url: str) -> None:
    """A sender that died after recording its message leaves it for the next sender, who
    answers it first (its run from the conversation before it), then its own."""
    a = chat_agent()
    async with stead.Runtime(url, agents=[a]) as rt:
        await rt.send("c", "one", agent=a)
        await rt.store.record_message(  # type: ignore[attr-defined]
            "c",
            message_id="orphan",
            run_id="run_orphan",
            agent="chat",
            input={"role": "user", "content": "two"},
            now=0.0,
        )
        view = await rt.send("c", "three")
        assert view.output == "answer to 'three' after 2 messages, 2 answers"
        orphan = await rt.get("run_orphan")
        assert orphan.output == "answer to 'two' after 1 messages, 1 answers"


async def test_attachments_reach_the_model_from_the_store_in_every_later_turn(url: str) -> None:
    """An image sent with a message is stored once and named by digest; each request of
    this run and of the conversation's later runs carries its bytes (fetched from the
    store, in any process) for the provider to send."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    seen: list[dict[str, bytes]] = []

    def look(request: Any) -> str:
        seen.append(dict(request.attachments))
        return "a picture"

    a = stead.Agent("chat", ScriptedModel([look, look]), [])
    async with stead.Runtime(url, agents=[a]) as rt:
        first = await rt.send("c", "what is this?", agent=a, attachments=[stead.Image(png)])
        (ref,) = first.messages[0].attachments  # type: ignore[union-attr]
        assert (ref.kind, ref.media_type) == ("image", "image/png")
        await rt.send("c", "sure?")
    async with stead.Runtime(url, agents=[a]) as fresh:  # a new process reads it back
        assert (await fresh.get(first.run_id)).messages == first.messages
    assert seen == [{ref.digest: png}, {ref.digest: png}]


async def test_many_sends_at_once_from_one_runtime_are_answered_in_order(url: str) -> None:
    a = chat_agent()
    async with stead.Runtime(url, agents=[a]) as rt:
        await asyncio.gather(*(rt.send("c", f"m{i}", agent=a) for i in range(4)))
        for n, e in enumerate(await rt.conversation("c")):
            said = e.input["content"]
            view = await rt.get(e.run_id)
            assert view.output == f"answer to {said!r} after {n} messages, {n} answers"
