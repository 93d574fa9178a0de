"""A follow-up in a conversation, in another process: the first message is answered by a
child process that then exits; the SDK's ``Runner`` of the follow-up's run, here, reads that
turn through the session stead gives it (``SteadSession``, from the log), so the model is sent
the earlier exchange before the new message."""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import asyncio
import subprocess
import sys
from pathlib import Path

from _oai_scripts import HERE, env
from openai import AsyncOpenAI
from wire_server import WireServer
from wire_shapes import openai_stream

import stead
import stead.openai_agents as sa
from stead.core.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage


def _send_elsewhere(e: dict[str, str], text: str) -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / "oai_session_child.py"), "conv_ada", text],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=e,
        cwd=HERE,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_follow_up_in_another_process_sees_the_earlier_turn(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with WireServer() as server:
        server.push(openai_stream("Noted, Ada."), openai_stream("Your name is Ada."))
        e = env(server.url, tmp_path / "deliveries.jsonl", STEAD_TEST_STORE=store)
        assert _send_elsewhere(e, "My name is Ada.").startswith("completed Noted, Ada.")
        import oai_handoff_support

        async def follow_up() -> stead.RunView:
            client = AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0)
            try:
                agent = oai_handoff_support.build(client)
                async with stead.Runtime(store, agents=[agent]) as rt:
                    return await rt.send("conv_ada", "What is my name?")
            finally:
                await client.close()

        view = asyncio.run(follow_up())
    assert (view.status.value, view.output) == ("completed", "Your name is Ada.")
    first, follow_up = server.requests
    said = [(m["role"], m["content"]) for m in follow_up.body["messages"] if m["role"] != "system"]
    assert said == [
        ("user", "My name is Ada."),
        ("assistant", "Noted, Ada."),
        ("user", "What is my name?"),
    ]
    assert [m["role"] for m in first.body["messages"]] == ["system", "user"]


async def test_the_session_holds_the_conversation_as_the_sdks_items() -> None:
    session = sa.SteadSession(
        "conv",
        [
            UserMessage(content="Find Ada."),
            AssistantMessage(
                text="Looking.",
                tool_calls=(ToolCall(id="c1", name="find", arguments='{"q": "Ada"}'),),
            ),
            ToolResultMessage(tool_call_id="c1", name="find", content="found"),
        ],
    )
    assert await session.get_items(limit=2) == [
        {"type": "function_call", "call_id": "c1", "name": "find", "arguments": '{"q": "Ada"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "found"},
    ]
    await session.add_items([{"role": "user", "content": "And Bob?"}])
    assert await session.pop_item() == {"role": "user", "content": "And Bob?"}
    assert (await session.get_items())[0] == {"role": "user", "content": "Find Ada."}
    await session.clear_session()
    assert await session.get_items() == []


def test_a_session_of_the_users_own_is_refused_saying_what_to_use() -> None:
    from agents import Agent, SQLiteSession
    from agents.testing import ScriptedModel

    agent = Agent(name="greeter", model=ScriptedModel([]))
    with pytest.raises(stead.UserError, match=r"SQLiteSession.*rt\.send.*SteadSession"):
        sa.durable(agent, session=SQLiteSession("conv_ada"))
