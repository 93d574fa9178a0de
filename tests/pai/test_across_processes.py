"""A Pydantic AI agent's run across processes: a replay that diverges from the log stops
with a typed error naming the step; the budget counts what was spent before a crash; an
approval asked in one process is decided and carried on in others (``stead approve``)."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import asyncio
from pathlib import Path
from typing import Any

from _agent_crashes import budget_spent_before_a_crash
from _scripts import CUSTOMER, MESSAGE, PAI, calls_reply, deliveries, env, stead_cli, text_reply
from pydantic_ai.capabilities import AbstractCapability
from wire_server import WireServer

import stead
from stead.errors import ReplayDiverged

PROVIDER = "anthropic"


def replies() -> list[Any]:
    return [
        calls_reply(PROVIDER, ("toolu_1", "find_customer", CUSTOMER)),
        calls_reply(PROVIDER, ("toolu_2", "send_message", MESSAGE)),
        text_reply(PROVIDER, "Ada has been told."),
    ]


def killed_after_the_send_intent(
    tmp_path: Path, server: WireServer, **extra: str
) -> tuple[str, dict[str, str]]:
    """Run the support agent in a process killed once turn 1's send is recorded as intent."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    e = env(PROVIDER, server.url, tmp_path / "deliveries.jsonl", **extra)
    died = stead_cli(
        "--store",
        store,
        "run",
        "support_agent:agent",
        "Tell Ada her refund is on its way.",
        env={**e, "STEAD_CRASH_AT": "after_intent#2"},
    )
    assert died.returncode == -9, died.stdout + died.stderr
    return store, e


class Redirect(AbstractCapability[Any]):
    """A change of code after the crash: every message now goes to someone else."""

    async def before_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        if call.tool_name == "send_message":
            return {**args, "to": "someone.else@example.com"}
        return args


async def _resume(store: str, agent: Any) -> tuple[stead.RunView | BaseException, list[str]]:
    async with stead.Runtime(store, agents=[agent]) as rt:
        (run,) = await rt.store.list_runs()
        try:
            outcome: stead.RunView | BaseException = await rt.resume(run.run_id)
        except ReplayDiverged as exc:
            outcome = exc
        kinds = [e.event.kind for e in await rt.store.read_events(run.run_id)]
    return outcome, kinds


def test_a_replay_with_other_arguments_stops_with_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WireServer() as server:
        server.push(*replies())
        store, e = killed_after_the_send_intent(tmp_path, server)
        for k, v in e.items():
            monkeypatch.setenv(k, v)
        import support_agent

        changed = support_agent.build(more=[Redirect()])
        outcome, kinds = asyncio.run(_resume(store, changed))
    assert isinstance(outcome, ReplayDiverged), outcome
    assert outcome.turn == 1 and outcome.call_id == "toolu_2"
    assert "turn 1" in str(outcome) and "send_message" in str(outcome)
    assert "step_failed" in kinds
    assert deliveries(tmp_path / "deliveries.jsonl") == []  # never given to the other call


def test_the_budget_counts_what_was_spent_before_the_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def capped(budget: stead.Budget) -> Any:
        import support_agent

        # Two turns of 25 + 15 tokens were spent before the kill: 80 > 60.
        return support_agent.build(budget=budget)

    budget_spent_before_a_crash(PAI, tmp_path, monkeypatch, capped)


def test_an_approval_asked_in_one_process_is_decided_in_another(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*replies())
        e = env(PROVIDER, server.url, ledger, SUPPORT_APPROVAL="1")
        first = stead_cli(
            "--store",
            store,
            "run",
            "support_agent:agent",
            "Tell Ada her refund is on its way.",
            env=e,
        )
        assert "awaiting_approval" in first.stdout, first.stdout + first.stderr
        assert deliveries(ledger) == []
        (run_id,) = asyncio.run(_runs(store))
        decided = stead_cli(
            "--store",
            store,
            "approve",
            run_id,
            "toolu_2",
            "--agents",
            "support_agent:agent",
            env=e,
        )
        assert decided.returncode == 0, decided.stdout + decided.stderr
        assert "completed" in decided.stdout, decided.stdout
    assert len(deliveries(ledger)) == 1
    (same,) = asyncio.run(_runs(store))
    assert same == run_id  # the same run went on


async def _runs(store: str) -> list[str]:
    from stead.store import open_store

    s = open_store(store)
    try:
        return [r.run_id for r in await s.list_runs()]
    finally:
        await s.close()
