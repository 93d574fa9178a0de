"""A LangChain agent's budget after a crash: the tokens spent by a process that was SIGKILLed
count against the run's budget when another process resumes it, so no model call is made past
it, and the call whose intent was recorded before the kill still runs once."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

import asyncio
from pathlib import Path

from _lc_scripts import CUSTOMER, FOUND, LC, MESSAGE, SENT, deliveries, env, stead_cli
from wire_server import WireServer
from wire_shapes import openai_stream

import stead


def test_the_budget_counts_what_was_spent_before_the_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(
            openai_stream(tools=[(FOUND, "find_customer", [CUSTOMER])]),
            openai_stream(tools=[(SENT, "send_message", [MESSAGE])]),
            openai_stream("Ada has been told."),
        )
        e = env(server.url, ledger)
        died = stead_cli(
            "--store",
            store,
            "run",
            LC.agent,
            "Tell Ada her refund is on its way.",
            env={**e, "STEAD_CRASH_AT": "after_intent#2"},
        )
        assert died.returncode == -9, died.stdout + died.stderr
        asked_before = len(server.requests)
        for k, v in e.items():
            monkeypatch.setenv(k, v)
        import lc_support
        from langchain.agents import create_agent

        import stead.langchain as sl

        # The same agent with a budget, its model pointed at this test's server. Two turns of
        # 40 + 12 tokens were spent before the kill: 104 > 60.
        graph = create_agent(
            lc_support.model(),
            [lc_support.find_customer, lc_support.send_message],
            system_prompt="You help customers.",
            name="support",
            middleware=[sl.SteadMiddleware()],
        )
        capped = sl.durable(graph, budget=stead.Budget(max_total_tokens=60))

        async def resume() -> stead.RunView:
            async with stead.Runtime(store, agents=[capped]) as rt:
                (run,) = await rt.store.list_runs()
                return await rt.resume(run.run_id)

        outcome = asyncio.run(resume())
        asked_after = len(server.requests)
    assert outcome.status.value == "failed"
    assert "budget" in str(outcome.error)
    assert asked_after == asked_before == 2  # no model call past the budget
    assert len(deliveries(ledger)) == 1  # the recorded intent ran, once
