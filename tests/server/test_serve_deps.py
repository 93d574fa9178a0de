"""``stead serve`` without ``--deps`` serves an agent whose tools need deps: its runs are
listed and its question answered over HTTP, as the dashboard does it; the run is driven by a
process that has the deps."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from _deps_agents import build, make_shop
from _stack import Stack

import stead


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("deps")
    s = Stack(f"sqlite:///{folder / 'deps.db'}", folder)
    s.serve("--agents", "_deps_agents:agents")  # no --deps, no --worker
    yield s
    s.close()


def test_a_deps_agents_question_is_answered_over_http(stack: Stack) -> None:
    client = stack.client
    assert client is not None
    assert [a["name"] for a in client.get("/agents").json()] == ["shop"]

    async def drive(run_id: str | None) -> stead.RunView:
        async with stead.Runtime(stack.store, agents=build(), deps=make_shop()) as rt:
            if run_id is None:
                run_id = await rt.start("shop", "Where is order 42?")
            return await rt.run(run_id)

    asked = asyncio.run(drive(None))
    (question,) = asked.questions
    (item,) = client.get("/approvals").json()
    assert item["reason"] == "question" and item["payload"]["question"] == "Home or office?"
    assert item["payload"]["answer_schema"]["enum"] == ["home", "office"]
    url = f"/runs/{asked.run_id[:12]}/questions/{question.tool_call_id}/answer"
    answered = client.post(url, json={"value": "office"})
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "awaiting_tool"

    # Serving needs no deps; driving does: the process that has them finishes the run.
    done = asyncio.run(drive(asked.run_id))
    assert done.output == "It goes to your office."
    assert any("the test's shop: order 42 shipped" in str(m) for m in done.messages)
