"""A Pydantic AI tool that asks for approval while running (``ApprovalRequired`` in its body),
across processes killed at the boundaries: the run waits on a person, and the approving
process dies right after the approval's commit (the next process runs the call, approved,
once). Under ``make soak`` also on PostgreSQL, and with the first process killed after the
tool asked and before that was recorded (the call is in flight: its reconcile function says
it did not happen, it runs again and asks again). The same run, one delivery."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import asyncio
import os
from pathlib import Path
from typing import Any

from _scripts import CUSTOMER, MESSAGE, calls_reply, deliveries, env, stead_cli, text_reply
from wire_server import WireServer

import stead
from stead.core.states import RunStatus

PROVIDER = "anthropic"
SOAK = os.environ.get("STEAD_TEST_ALL_MODES") == "1"
TWO_CHILDREN = pytest.mark.timeout(300)  # two CLI children importing Pydantic AI, under load
CASES = [
    pytest.param("sqlite", False, id="sqlite"),
    *(
        [
            pytest.param("sqlite", True, id="sqlite-killed-as-it-asks", marks=TWO_CHILDREN),
            pytest.param("postgres", False, id="postgres"),
            pytest.param("postgres", True, id="postgres-killed-as-it-asks", marks=TWO_CHILDREN),
        ]
        if SOAK
        else []
    ),
]


def replies() -> list[Any]:
    return [
        calls_reply(PROVIDER, ("toolu_1", "find_customer", CUSTOMER)),
        calls_reply(PROVIDER, ("toolu_2", "send_message", MESSAGE)),
        text_reply(PROVIDER, "Ada has been told."),
    ]


async def _drive(store: str, agent: Any, run_id: str) -> stead.RunView:
    async with stead.Runtime(store, agents=[agent]) as rt:
        return await rt.resume(run_id)


async def _start(store: str, agent: Any) -> stead.RunView:
    async with stead.Runtime(store, agents=[agent]) as rt:
        return await rt.run(await rt.start(agent, "Tell Ada her refund is on its way."))


async def _log(store: str) -> tuple[str, list[Any]]:
    from stead.store import open_store

    s = open_store(store)
    try:
        (run,) = await s.list_runs()
        return run.run_id, [e.event for e in await s.read_events(run.run_id)]
    finally:
        await s.close()


@pytest.mark.parametrize(("kind", "killed_as_it_asks"), CASES)
def test_killed_as_the_tool_asks_and_right_after_the_approval(
    kind: str,
    killed_as_it_asks: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: Any,
) -> None:
    store = (
        f"sqlite:///{tmp_path / 'runs.db'}"
        if kind == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*replies())
        e = env(PROVIDER, server.url, ledger, SUPPORT_APPROVAL="tool")
        for k, v in e.items():
            monkeypatch.setenv(k, v)
        import support_agent

        agent = support_agent.build()
        if killed_as_it_asks:
            # The tool ran, asked for approval (it did not send), and its process died before
            # the log said so: the call was started and has no result.
            died = stead_cli(
                "--store",
                store,
                "run",
                "support_agent:agent",
                "Tell Ada her refund is on its way.",
                env={**e, "STEAD_CRASH_AT": "after_tool_effect:send_message"},
            )
            assert died.returncode == -9, died.stdout + died.stderr
            assert deliveries(ledger) == []
            run_id, log = asyncio.run(_log(store))
            assert "tool_call_deferred" not in {x.kind for x in log}
            # Resumed: reconciled (not sent), run again, and this time its ask is recorded.
            view = asyncio.run(_drive(store, agent, run_id))
        else:
            view = asyncio.run(_start(store, agent))
            run_id = view.run_id
        assert view.status is RunStatus.AWAITING_APPROVAL, view.error
        assert [a.tool for a in view.approvals] == ["send_message"]
        assert deliveries(ledger) == []
        # Approved in a process that dies right after the approval's commit.
        approver = stead_cli(
            "--store",
            store,
            "approve",
            run_id,
            "toolu_2",
            "--agents",
            "support_agent:agent",
            env={**e, "STEAD_CRASH_AT": "after_approval_commit"},
        )
        assert approver.returncode == -9, approver.stdout + approver.stderr
        assert deliveries(ledger) == []
        # A fresh agent, as the next process has: its model's HTTP client belongs to the
        # event loop it was first used on, which has closed.
        view = asyncio.run(_drive_on(store, support_agent.build(), run_id))
        asked = len(server.requests)
    assert view.status is RunStatus.COMPLETED and view.run_id == run_id, view.error
    assert len(deliveries(ledger)) == 1
    _, log = asyncio.run(_log(store))
    kinds = [x.kind for x in log]
    assert kinds.count("tool_call_deferred") == 1
    assert kinds.count("tool_reconciled") == (1 if killed_as_it_asks else 0)
    (sent,) = [x for x in log if x.kind == "tool_result_recorded" and x.tool_call_id == "toolu_2"]
    assert not sent.is_error and sent.attempt == (3 if killed_as_it_asks else 2)
    assert asked == 3  # each turn asked of the model once, across the three processes


async def _drive_on(store: str, agent: Any, run_id: str) -> stead.RunView:
    async with stead.Runtime(store, agents=[agent]) as rt:
        return await rt.run(run_id)
