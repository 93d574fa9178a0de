"""Questions, tool limits and deadlines through each real provider's SDK, against the local
wire server: a question's answer is the tool result the model is sent; a timed-out, retried
tool sends one result; a run deadline closes a stalled model stream and ends the run
``timed_out``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import pytest
from test_runs import FAST, model_for, stream
from wire_server import WireServer

import stead
from stead.core.events import ToolAttemptFailed
from stead.core.states import RunStatus
from stead.testing import assert_valid_history

KINDS = ["anthropic", "openai"]


class Address(pydantic.BaseModel):
    street: str
    zip_code: str


def _results_sent(kind: str, body: dict[str, Any]) -> list[str]:
    """The tool results a request carries, as the provider's wire format has them."""
    if kind == "anthropic":
        return [
            b["content"]
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.mark.parametrize("kind", KINDS)
async def test_a_questions_answer_is_the_tool_result_the_model_reads(
    kind: str, server: WireServer, store: str
) -> None:
    server.push(
        stream(kind, tools=[("call_q1", "ask_user", ['{"question": "Where to?"}'])]),
        stream(kind, "Shipping to 1 Main St."),
    )
    agent = stead.Agent("ship", model_for(kind, server), [stead.question_tool(Address)])
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "ship my order")
        view = await rt.run(rid)
        assert view.status is RunStatus.AWAITING_APPROVAL
        (q,) = view.approvals
        assert q.payload["question"] == "Where to?"
        sent_tools = server.requests[0].body["tools"]
        assert "ask_user" in json.dumps(sent_tools)
        with pytest.raises(stead.ApprovalError, match="zip_code"):
            await rt.answer(rid, q.tool_call_id, {"street": "1 Main St."})
        await rt.answer(rid, q.tool_call_id, {"street": "1 Main St.", "zip_code": "02139"})
        done = await rt.run(rid)
        assert done.output == "Shipping to 1 Main St."
        assert_valid_history(await rt.state(rid))
    (answer,) = _results_sent(kind, server.requests[1].body)
    assert json.loads(answer) == {"street": "1 Main St.", "zip_code": "02139"}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_timed_out_attempt_is_retried_and_the_model_reads_one_result(
    kind: str, server: WireServer, store: str
) -> None:
    attempts: list[int] = []

    @stead.tool(effect="read_only", timeout=0.3, retries=1)
    async def quote(item: str, ctx: stead.ToolContext) -> str:
        """Price an item (the first attempt hangs)."""
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            await ctx.signal.wait()
            raise stead.Aborted(ctx.signal.reason)
        return f"{item}: 12.00"

    server.push(
        stream(kind, tools=[("call_p1", "quote", ['{"item": "mug"}'])]),
        stream(kind, "A mug is 12.00."),
    )
    agent = stead.Agent("quotes", model_for(kind, server), [quote])
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "price a mug")
        view = await rt.run(rid)
        events = [e.event for e in await rt.events(rid)]
    assert view.output == "A mug is 12.00." and attempts == [1, 2]
    (failed,) = [e for e in events if isinstance(e, ToolAttemptFailed)]
    assert "took longer than its limit of 0.3s" in failed.error
    assert _results_sent(kind, server.requests[1].body) == ["mug: 12.00"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_run_deadline_closes_a_stalled_model_stream(
    kind: str, server: WireServer, store: str
) -> None:
    stalled = stream(kind, "Thinking about", " it", stall_after=2)
    server.push(stalled)
    # Room for the SDK's first request (its lazy imports) to reach the stall first: the first
    # provider test an xdist worker runs pays for them inside the run's time.
    limits = stead.Limits(max_duration=2.0)
    agent = stead.Agent("slow", model_for(kind, server), [], limits=limits)
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "think")
        view = await rt.run(rid)
        assert_valid_history(await rt.state(rid))
    assert view.status is RunStatus.TIMED_OUT
    assert view.error is not None and view.error["phase"] == "run"
    assert stalled.client_closed.wait(60)  # the stream was closed, not left hanging
