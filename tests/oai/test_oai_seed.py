"""The seed scenario under the OpenAI Agents SDK: an agent sends one message; its process is
SIGKILLed after the delivery and before the result is recorded; ``stead resume`` finishes
the run, and the message went out once.

The agent is a plain ``agents.Agent`` with ``@function_tool``s, on the SDK's own
``OpenAIChatCompletionsModel`` (the official ``AsyncOpenAI`` client) against the suite's
wire server, handed to stead with ``stead.openai_agents.durable``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import asyncio
from pathlib import Path

from _oai_scripts import FOUND, SENT, deliveries, env, seed_replies, stead_cli, tool_results
from wire_server import WireServer

from stead.core.states import RunStatus
from stead.store import open_store


def _only_run(store: str) -> str:
    async def go() -> str:
        s = open_store(store)
        try:
            runs = await s.list_runs()
        finally:
            await s.close()
        assert len(runs) == 1, runs
        return runs[0].run_id

    return asyncio.run(go())


def test_killed_after_delivery_resumes_and_delivers_once(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*seed_replies())
        e = env(server.url, ledger)
        died = stead_cli(
            "--store",
            store,
            "run",
            "oai_support:agent",
            "Tell Ada her refund is on its way.",
            env={**e, "STEAD_CRASH_AT": "after_tool_effect:send_message"},
        )
        assert died.returncode == -9, died.stdout + died.stderr
        assert len(deliveries(ledger)) == 1  # delivered; the result never recorded
        run_id = _only_run(store)

        done = stead_cli("--store", store, "resume", run_id, "--agents", "oai_support:agent", env=e)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "completed" in done.stdout

    assert len(deliveries(ledger)) == 1, "delivered once"
    # Two model requests in all: the first turn was replayed from the log on resume.
    assert len(server.requests) == 2
    results = tool_results(server.requests[1])
    assert set(results) == {FOUND, SENT}
    assert "Ada" in results[FOUND]
    assert '"delivered":true' in results[SENT].replace(" ", "").lower()

    async def log() -> tuple[str, list[str]]:
        s = open_store(store)
        try:
            record = await s.get_run(run_id)
            return str(record.status), [e.event.kind for e in await s.read_events(run_id)]
        finally:
            await s.close()

    status, kinds = asyncio.run(log())
    assert status == RunStatus.COMPLETED.value
    assert "tool_reconciled" in kinds  # the send in flight was asked about, never run again
    assert kinds.count("assistant_message") == 2
