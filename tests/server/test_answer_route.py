"""The HTTP answer route: the inbox lists a question with its schema, and
``POST /runs/{id}/questions/{call}/answer`` answers it (a misfit is a 409, nothing written)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import httpx

import stead
from stead.server import create_app
from stead.testing import Reply, ScriptedModel

SECRET = "a-long-enough-secret-for-tests-0123"


async def test_the_inbox_lists_a_question_and_the_route_answers_it(tmp_path: Path) -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[("ask_user", {"question": "Which size?"})]), "Size noted."]
    )
    agent = stead.Agent("sizer", model, [stead.question_tool(Literal["S", "M", "L"])])
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent]) as rt:
        rid = await rt.start(agent, "order a shirt")
        await rt.run(rid)
        app = create_app(rt, {SECRET: "bob"})
        auth = {"Authorization": f"Bearer {SECRET}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            (item,) = (await http.get("/approvals", headers=auth)).json()
            assert item["reason"] == "question" and item["payload"]["question"] == "Which size?"
            assert item["payload"]["answer_schema"]["enum"] == ["S", "M", "L"]
            url = f"/runs/{rid}/questions/{item['tool_call_id']}/answer"
            wrong = await http.post(url, json={"value": "XXL"}, headers=auth)
            assert wrong.status_code == 409 and "does not fit" in wrong.json()["detail"]
            nobody = await http.post(url, json={"value": "M"})
            assert nobody.status_code == 401
            ok = await http.post(url, json={"value": "M"}, headers=auth)
            assert ok.status_code == 200, ok.text
            assert ok.json()["status"] == "awaiting_tool" and ok.json()["approvals"] == []
            again = await http.post(url, json={"value": "M"}, headers=auth)
            assert again.status_code == 409 and "asked no question" in again.json()["detail"]
        done = await rt.run(rid)
        assert done.output == "Size noted."
        decided = [e.event for e in await rt.events(rid) if e.event.kind == "approval_decided"]
        assert [(d.decision, d.by) for d in decided] == [("answer", "bob")]  # type: ignore[union-attr]
