"""An Agents SDK agent's run across processes: an approval asked in one process is decided
in another and the same run goes on; a budget counts what was spent before a crash."""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import asyncio
from pathlib import Path
from typing import Any

from _agent_crashes import budget_spent_before_a_crash
from _oai_scripts import CUSTOMER, FOUND, MESSAGE, OAI, SENT, deliveries, env, stead_cli
from wire_server import WireServer
from wire_shapes import openai_stream

import stead
from stead.store import open_store


def replies() -> list[Any]:
    return [
        openai_stream(tools=[(FOUND, "find_customer", [CUSTOMER])]),
        openai_stream(tools=[(SENT, "send_message", [MESSAGE])]),
        openai_stream("Ada has been told."),
    ]


async def _runs(store: str) -> list[str]:
    s = open_store(store)
    try:
        return [r.run_id for r in await s.list_runs()]
    finally:
        await s.close()


def test_an_approval_asked_in_one_process_is_decided_in_another(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*replies())
        e = env(server.url, ledger, SUPPORT_APPROVAL="1")
        first = stead_cli(
            "--store", store, "run", "oai_support:agent", "Tell Ada her refund.", env=e
        )
        assert "awaiting_approval" in first.stdout, first.stdout + first.stderr
        assert deliveries(ledger) == []
        (run_id,) = asyncio.run(_runs(store))
        decided = stead_cli(
            "--store", store, "approve", run_id, SENT, "--agents", "oai_support:agent", env=e
        )
        assert decided.returncode == 0, decided.stdout + decided.stderr
        assert "completed" in decided.stdout, decided.stdout
    assert len(deliveries(ledger)) == 1
    (same,) = asyncio.run(_runs(store))
    assert same == run_id  # the same run went on
    assert len(server.requests) == 3  # no turn asked twice across the two processes


def test_the_budget_counts_what_was_spent_before_the_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def capped(budget: stead.Budget) -> stead.Agent:
        import oai_support

        # Two turns of 40 + 12 tokens were spent before the kill: 104 > 60.
        return oai_support.build(budget=budget)

    budget_spent_before_a_crash(OAI, tmp_path, monkeypatch, capped)
