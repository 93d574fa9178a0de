"""A LangChain agent's budget after a crash: the tokens spent by a process that was SIGKILLed
count against the run's budget when another process resumes it, so no model call is made past
it, and the call whose intent was recorded before the kill still runs once."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

from pathlib import Path

from _agent_crashes import budget_spent_before_a_crash
from _lc_scripts import LC

import stead


def test_the_budget_counts_what_was_spent_before_the_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def capped(budget: stead.Budget) -> stead.Agent:
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
        return sl.durable(graph, budget=budget)

    budget_spent_before_a_crash(LC, tmp_path, monkeypatch, capped)
