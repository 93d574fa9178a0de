"""A handoff within one stead run: the triage agent hands the customer to the support agent,
whose tool sends the message; the ``stead run`` process is SIGKILLed after the delivery and
before its result is recorded; a resume in another process goes on with the support agent,
its send reconciled by the effect class given for it, delivered once, and the handoff's
``on_handoff`` callback, recorded with the handoff, not run again."""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import asyncio
import json
from pathlib import Path
from typing import Any

from _oai_scripts import MESSAGE, SENT, deliveries, env, stead_cli
from oai_handoff_support import SUPPORT, TRIAGE, handed_over
from openai import AsyncOpenAI
from wire_server import Seen, WireServer
from wire_shapes import openai_stream

import stead
from stead.store import open_store

HANDOFF = "call_h1"


def _system(seen: Seen) -> str:
    return str(next(m["content"] for m in seen.body["messages"] if m["role"] == "system"))


def _tools(seen: Seen) -> set[str]:
    return {t["function"]["name"] for t in seen.body.get("tools", [])}


async def _log(store: str) -> tuple[str, list[Any]]:
    s = open_store(store)
    try:
        (run,) = await s.list_runs()
        return run.run_id, [e.event for e in await s.read_events(run.run_id)]
    finally:
        await s.close()


def test_killed_after_the_handed_to_agents_delivery_resumes_on_that_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(
            openai_stream(tools=[(HANDOFF, "transfer_to_support", ["{}"])]),
            openai_stream(tools=[(SENT, "send_message", [MESSAGE])]),
            openai_stream("Ada has been told."),
        )
        e = env(server.url, ledger)
        died = stead_cli(
            "--store",
            store,
            "run",
            "oai_handoff_support:agent",
            "Tell Ada her refund is on its way.",
            env={**e, "STEAD_CRASH_AT": "after_tool_effect:send_message"},
        )
        assert died.returncode == -9, died.stdout + died.stderr
        assert len(deliveries(ledger)) == 1  # delivered; the result never recorded
        assert len(server.requests) == 2
        run_id, _ = asyncio.run(_log(store))

        # A fresh process of its own resumes it: this one, its agents built on this server.
        monkeypatch.setenv("STEAD_TEST_LEDGER", str(ledger))
        import oai_handoff_support

        async def resume() -> stead.RunView:
            client = AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0)
            try:
                agent = oai_handoff_support.build(client)
                async with stead.Runtime(store, agents=[agent]) as rt:
                    return await rt.resume(run_id)
            finally:
                await client.close()

        view = asyncio.run(resume())
        assert view.status.value == "completed", view.error

    assert len(deliveries(ledger)) == 1, "delivered once"
    # on_handoff ran once, in the killed process: the resume found the handoff recorded.
    assert len(handed_over().read_text().splitlines()) == 1
    first, second, last = server.requests
    assert (_system(first), _tools(first)) == (TRIAGE, {"transfer_to_support"})
    assert (_system(second), _tools(second)) == (SUPPORT, {"send_message"})
    # The resumed run asked the handed-to agent, with its tools, and no turn twice.
    assert (_system(last), _tools(last)) == (SUPPORT, {"send_message"})
    sent = {m.get("tool_call_id"): m.get("content") for m in last.body["messages"]}
    assert json.loads(str(sent[SENT]))["delivered"] is True

    _, events = asyncio.run(_log(store))
    kinds = [ev.kind for ev in events]
    assert "tool_reconciled" in kinds  # the send in flight was asked about, never run again
    results = {ev.tool_call_id: ev.content for ev in events if ev.kind == "tool_result_recorded"}
    assert json.loads(results[HANDOFF]) == {"assistant": "support"}  # the handoff, journaled
    assert kinds.count("assistant_message") == 3
