"""A Pydantic AI ``MCPToolset`` (a real MCP server, a stdio child process) under
``SteadDurability``: its tools are listed once when the agent is given to stead and recorded
in the run (``tools_listed``); each call is a stead call whose effect class comes from the
server's annotations or from ``SetToolMetadata``, carrying its idempotency key to the server;
a process SIGKILLed after the server sent a message resumes without sending it again."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from wire_server import WireServer
from wire_shapes import anthropic_stream

import stead
from stead.core.states import RunStatus
from stead.store import open_store

HERE = Path(__file__).parent
STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]
LOOKUP = ("toolu_1", "lookup_order", ['{"order_id": 42}'])
TICKET = ("toolu_2", "upsert_ticket", ['{"order_id": 42, "note": "refund"}'])
SEND = ("toolu_3", "send_message", ['{"to": "ada@example.com", "body": "Refunded."}'])


def replies() -> list[Any]:
    return [anthropic_stream(tools=[LOOKUP, TICKET, SEND]), anthropic_stream("Ada was told.")]


def ledger_rows(path: Path, event: str, tool: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [r for r in rows if r["event"] == event and r["tool"] == tool]


async def test_calls_are_stead_calls_classed_by_annotations_and_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "mcp.jsonl"
    monkeypatch.setenv("STEAD_MCP_LEDGER", str(ledger))  # the server inherits it
    import mcp_pai_agent

    with WireServer() as server:
        server.push(*replies())
        agent = mcp_pai_agent.build(server.url)
        async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
            run_id = await rt.start(agent, "Refund order 42 and tell Ada.")
            view = await rt.run(run_id)
            log = [e.event for e in await rt.store.read_events(run_id)]
        offered = [t["name"] for t in server.requests[0].body["tools"]]
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "Ada was told."
    assert sorted(offered) == ["lookup_order", "send_message", "upsert_ticket", "wait_forever"]
    requested = {e.name: e for e in log if e.kind == "tool_call_requested"}  # type: ignore[attr-defined]
    assert {n: r.effect_class for n, r in requested.items()} == {  # type: ignore[attr-defined]
        "lookup_order": "read_only",  # readOnlyHint
        "upsert_ticket": "idempotent_write",  # idempotentHint
        "send_message": "non_idempotent",  # neither
    }
    (listed,) = [e for e in log if e.kind == "tools_listed"]
    assert listed.source == "orders"  # type: ignore[attr-defined]
    assert listed.tools["lookup_order"]["effect"] == "read_only"  # type: ignore[attr-defined]
    for name, call in requested.items():  # each call reached the server once, with its key
        (done,) = ledger_rows(ledger, "done", name)
        assert done["key"] == call.idempotency_key  # type: ignore[attr-defined]
    results = {e.tool_call_id: e.content for e in log if e.kind == "tool_result_recorded"}  # type: ignore[attr-defined]
    assert results["toolu_1"] == "order 42: shipped"
    assert "order 42: shipped" in str(server.requests[1].body["messages"])


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STEAD, *args], capture_output=True, text=True, timeout=120, env=env, cwd=HERE
    )


def _only_run(store: str) -> str:
    async def go() -> str:
        s = open_store(store)
        try:
            (run,) = await s.list_runs()
        finally:
            await s.close()
        return run.run_id

    return asyncio.run(go())


def test_killed_after_the_server_sent_resumes_without_sending_again(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "mcp.jsonl"
    with WireServer() as server:
        server.push(*replies())
        env = {**os.environ, "PAI_BASE_URL": server.url, "STEAD_MCP_LEDGER": str(ledger)}
        env.pop("STEAD_CRASH_AT", None)
        died = _cli(
            "--store",
            store,
            "run",
            "mcp_pai_agent:agent",
            "Refund order 42 and tell Ada.",
            env={**env, "STEAD_CRASH_AT": "after_tool_effect:send_message"},
        )
        assert died.returncode == -9, died.stdout + died.stderr
        assert len(ledger_rows(ledger, "done", "send_message")) == 1  # sent; not recorded
        run_id = _only_run(store)

        done = _cli("--store", store, "resume", run_id, "--agents", "mcp_pai_agent:agent", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "completed" in done.stdout, done.stdout
        sent_back = str(server.requests[-1].body["messages"])
    # The reconcile function found the message by its key: it was not sent again.
    assert len(ledger_rows(ledger, "started", "send_message")) == 1
    assert "sent to ada@example.com" in sent_back
    assert len(server.requests) == 2  # the recorded first reply was not asked for again
