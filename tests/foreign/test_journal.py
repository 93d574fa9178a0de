"""``stead.foreign`` without any framework: a toy agent loop of its own (ask the model, run
each call, until a text answer) journaled as a stead run. What the Pydantic AI integration
rests on, shown on its own: the run loop performs and records, the foreign loop reads the
log back; on a second drive it replays, and a replay asking for other work is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import stead
from stead.core.canonical import canonical_json
from stead.core.effects import ToolSucceeded
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.errors import ReplayDiverged
from stead.foreign import Journal, foreign_agent, foreign_tool
from stead.providers import ModelResponse


class Toy:
    """A framework's agent: its own loop, its own model and tool functions."""

    def __init__(self, replies: list[AssistantMessage], to: str = "ada") -> None:
        self.replies = replies
        self.to = to  # what its code sends to: a change of code changes the call
        self.asked = 0
        self.sent: list[str] = []

    async def run(self, journal: Journal) -> str:
        while True:

            async def ask() -> ModelResponse:
                self.asked += 1
                return ModelResponse(
                    message=self.replies[self.asked - 1], usage=Usage(input_tokens=10)
                )

            reply = (await journal.model(ask)).message
            if not reply.tool_calls:
                return reply.text
            for call in reply.tool_calls:
                args = {**json.loads(call.arguments), "to": self.to}

                async def send(args: dict[str, Any] = args) -> ToolSucceeded:
                    self.sent.append(args["to"])
                    return ToolSucceeded(content=f"sent to {args['to']}")

                await journal.tool(
                    call.id, call.name, lambda rec, a=args: rec == canonical_json(a), send
                )


def agent_for(toy: Toy) -> stead.Agent:
    schema = {"type": "object", "properties": {"to": {"type": "string"}}}
    send = foreign_tool("send", schema, effect="non_idempotent", requires_approval=True)
    return foreign_agent("toy", "toy-model", [send], toy.run)


REPLIES = [
    AssistantMessage(tool_calls=(ToolCall(id="c1", name="send", arguments='{"to":"ada"}'),)),
    AssistantMessage(text="Sent."),
]


async def test_a_foreign_loop_is_a_run_replayed_after_a_pause(tmp_path: Path) -> None:
    toy = Toy(REPLIES)
    agent = agent_for(toy)
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Tell Ada")
        view = await rt.run(run_id)
        assert view.status is stead.RunStatus.AWAITING_APPROVAL
        assert (toy.asked, toy.sent) == (1, [])
        await rt.approve(run_id, "c1", token=view.approvals[0].token)
        view = await rt.run(run_id)  # a second drive: the toy starts over and replays turn 0
        kinds = [e.event.kind for e in await rt.store.read_events(run_id)]
    assert view.status is stead.RunStatus.COMPLETED and view.output == "Sent."
    assert toy.asked == 2  # turn 0 answered from the log, turn 1 asked
    assert toy.sent == ["ada"]
    assert kinds.count("assistant_message") == 2 and kinds.count("tool_result_recorded") == 1
    assert view.usage.input_tokens == 20


async def test_a_replay_that_asks_for_other_work_is_refused(tmp_path: Path) -> None:
    toy = Toy(REPLIES)
    agent = agent_for(toy)
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "Tell Ada")
        view = await rt.run(run_id)
        await rt.approve(run_id, "c1", token=view.approvals[0].token)
        toy.to = "bob"  # the code changed while the run waited
        with pytest.raises(ReplayDiverged, match=r"turn 0, call c1 of 'send'") as caught:
            await rt.run(run_id)
    assert (caught.value.turn, caught.value.call_id) == (0, "c1")
    assert toy.sent == []
