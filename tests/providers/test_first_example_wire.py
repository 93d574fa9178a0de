"""The README's first example through each real provider's SDK, against the local wire
server: a chat agent with a typed answer, a tool reading ``ctx.deps``, a follow-up message
(``rt.send``) and a question answered by a person from another Runtime. The follow-up's
requests carry the whole conversation, read back from the run before it (each message is
stored once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel
from test_runs import model_for, stream
from wire_server import WireServer

import stead
from stead.core.events import RunCreated
from stead.core.states import RunStatus
from stead.testing import assert_valid_history


class Answer(BaseModel):
    """The agent's typed output."""

    text: str
    order_id: int | None = None


class Shop:
    """The live object the tool reads (never recorded)."""

    def status(self, order_id: int) -> str:
        return f"order {order_id}: shipped"


@stead.tool(effect="read_only")
def order_status(order_id: int, ctx: stead.ToolContext[Shop]) -> str:
    """Look an order up."""
    return ctx.deps.status(order_id)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_the_first_example_through_the_sdk(
    kind: str, server: WireServer, tmp_path: Path
) -> None:
    server.push(
        stream(kind, tools=[("call_1", "order_status", ['{"order_id": 42}'])]),
        stream(kind, tools=[("call_2", "final_result", ['{"text": "Shipped.", "order_id": 42}'])]),
        stream(kind, tools=[("call_3", "ask_user", ['{"question": "Home or office?"}'])]),
        stream(kind, tools=[("call_4", "final_result", ['{"text": "To your office."}'])]),
        stream(kind, tools=[("call_5", "final_result", ['{"text": "You are welcome."}'])]),
    )
    agent = stead.Agent(
        "support",
        model_for(kind, server),
        [order_status, stead.question_tool()],
        output_type=Answer,
        deps_type=Shop,
    )
    url = f"sqlite:///{tmp_path / 'support.db'}"
    async with stead.Runtime(url, agents=[agent], deps=Shop()) as rt:
        first = await rt.send("customer-7", "Where is order 42?", agent=agent)
        assert first.data == Answer(text="Shipped.", order_id=42)
        second = await rt.send("customer-7", "Can it go to another address?")
        assert second.status is RunStatus.AWAITING_APPROVAL
        (question,) = second.approvals
        assert question.payload["question"] == "Home or office?"
    async with stead.Runtime(url, agents=[agent], deps=Shop()) as other:  # a person, later
        await other.answer(second.run_id, question.tool_call_id, "office")
        done = await other.run(second.run_id)
        assert done.data_as(Answer) == Answer(text="To your office.")
        assert_valid_history(await other.state(second.run_id))
        third = await other.send("customer-7", "Thanks!")
        assert third.data == Answer(text="You are welcome.")
        stored = (await other.store.read_events(third.run_id))[0].event
        assert isinstance(stored, RunCreated) and stored.history_from == second.run_id
    follow_up = json.dumps(server.requests[2].body)
    for said in ("Where is order 42?", "order 42: shipped", "Can it go to another address?"):
        assert said in follow_up  # the whole conversation, and ctx.deps's result in it
    assert "office" in json.dumps(server.requests[3].body)
    last = json.dumps(server.requests[4].body)
    for said in ("Where is order 42?", "Home or office?", "To your office.", "Thanks!"):
        assert said in last
