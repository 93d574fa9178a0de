"""A LangChain agent's streamed model call watched live: ``ChatOpenAI`` (``streaming=True``)
against the wire server sends its text deltas to the run's live progress as they arrive;
only the finished reply is recorded."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

from pathlib import Path

from langchain.agents import create_agent
from langchain_openai import ChatOpenAI
from wire_server import WireServer
from wire_shapes import openai_stream

import stead
import stead.langchain as sl
from stead.core.states import RunStatus


async def test_streamed_text_reaches_live_progress(tmp_path: Path) -> None:
    seen: list[str] = []
    with WireServer() as server:
        model = ChatOpenAI(
            model="gpt-4.1",
            api_key="sk-test",
            base_url=server.url + "/v1",
            streaming=True,
            max_retries=0,
        )
        graph = create_agent(model, [], name="greeter", middleware=[sl.SteadMiddleware()])
        agent = sl.durable(graph)
        server.push(openai_stream("Hel", "lo, ", "Ada."))
        async with stead.Runtime(
            f"sqlite:///{tmp_path / 'r.db'}",
            agents=[agent],
            on_progress=lambda frame: seen.append(frame.text),
        ) as rt:
            run_id = await rt.start(agent, "Greet Ada")
            view = await rt.run(run_id)
            log = await rt.store.read_events(run_id)
    assert view.status is RunStatus.COMPLETED, view.error
    assert "".join(seen) == "Hello, Ada."
    assert len(seen) >= 3  # as it streamed, not one block at the end
    (reply,) = [e.event for e in log if e.event.kind == "assistant_message"]
    assert reply.message.text == "Hello, Ada."  # type: ignore[attr-defined]
