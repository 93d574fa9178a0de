"""A Pydantic AI ``MCPToolset`` (a real MCP server: one streamable-HTTP child on 127.0.0.1 for
the module; a stdio child per session under ``make soak``) under ``SteadDurability``: its
tools are listed once when the agent is given to stead and recorded in the run
(``tools_listed``); each call is a stead call whose effect class comes from the server's
annotations or from ``SetToolMetadata``, carrying its idempotency key to the server; a
process SIGKILLed at a crash point resumes without sending the message again.

The server is shared by the module's tests: each reads the ledger's rows of its own calls
(their idempotency keys, unique per run). One crash point by default; the others, and stdio,
under ``STEAD_TEST_ALL_MODES=1`` (``make soak``)."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wire_server import WireServer
from wire_shapes import anthropic_stream

import stead
from stead.core.states import RunStatus

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "mcp_tools"))
from _mcp import HttpServer
from _scripts import stead_cli

SOAK = os.environ.get("STEAD_TEST_ALL_MODES") == "1"
LOOKUP = ("toolu_1", "lookup_order", ['{"order_id": 42}'])
TICKET = ("toolu_2", "upsert_ticket", ['{"order_id": 42, "note": "refund"}'])
SEND = ("toolu_3", "send_message", ['{"to": "ada@example.com", "body": "Refunded."}'])
PROMPT = "Refund order 42 and tell Ada."


def replies() -> list[Any]:
    return [anthropic_stream(tools=[LOOKUP, TICKET, SEND]), anthropic_stream("Ada was told.")]


@pytest.fixture(scope="module")
def mcp_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One MCP server over streamable HTTP for the module: its URL and its ledger."""
    folder = tmp_path_factory.mktemp("mcp_http")
    ledger = folder / "mcp.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STEAD_MCP_LEDGER", str(ledger))  # the server inherits it
        server = HttpServer(folder / "http.log")
        server.start()
    try:
        yield server.url, ledger
    finally:
        server.kill()


def server_for(
    transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: Any
) -> tuple[str | None, Path]:
    """(the HTTP server's URL, or None for a stdio child of the agent's own; the ledger),
    with the ledger in this process's environment (the reconcile function reads it)."""
    if transport == "http":
        url, ledger = request.getfixturevalue("mcp_http")
    else:
        url, ledger = None, tmp_path / "mcp.jsonl"
    monkeypatch.setenv("STEAD_MCP_LEDGER", str(ledger))
    return url, ledger


def ledger_rows(path: Path, event: str, tool: str, key: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [r for r in rows if (r["event"], r["tool"], r["key"]) == (event, tool, key)]


@pytest.mark.parametrize("transport", ["http", *(["stdio"] if SOAK else [])])
async def test_calls_are_stead_calls_classed_by_annotations_and_metadata(
    transport: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: Any
) -> None:
    url, ledger = server_for(transport, tmp_path, monkeypatch, request)
    import mcp_pai_agent

    with WireServer() as server:
        server.push(*replies())
        agent = mcp_pai_agent.build(server.url, mcp_url=url)
        async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
            run_id = await rt.start(agent, PROMPT)
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
        assert len(ledger_rows(ledger, "done", name, call.idempotency_key)) == 1  # type: ignore[attr-defined]
    results = {e.tool_call_id: e.content for e in log if e.kind == "tool_result_recorded"}  # type: ignore[attr-defined]
    assert results["toolu_1"] == "order 42: shipped"
    assert "order 42: shipped" in str(server.requests[1].body["messages"])


CRASHES = [
    pytest.param("http", "after_tool_effect:send_message", id="http-after_tool_effect"),
    *(
        [
            pytest.param("http", "after_intent", id="http-after_intent"),
            pytest.param("http", "after_tool_started:send_message", id="http-after_tool_started"),
            pytest.param("stdio", "after_tool_effect:send_message", id="stdio-after_tool_effect"),
        ]
        if SOAK
        else []
    ),
]


def _run_killed(store: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``stead run`` of the agent, to its death at the crash point: forked from the warm
    parent that already imported Pydantic AI (``_scripts.stead_cli``); under a loaded
    machine the child's own imports (the MCP client's) still take a good part of a minute."""
    return stead_cli("--store", store, "run", "mcp_pai_agent:agent", PROMPT, env=env, timeout=240)


async def _resume(store: str, agent: Any) -> tuple[stead.RunView, list[Any]]:
    async with stead.Runtime(store, agents=[agent]) as rt:
        (run,) = await rt.store.list_runs()
        view = await rt.resume(run.run_id)
        return view, [e.event for e in await rt.store.read_events(run.run_id)]


@pytest.mark.timeout(300)  # a CLI child importing Pydantic AI and an MCP client, under load
@pytest.mark.parametrize(("transport", "crash"), CRASHES)
async def test_killed_at_a_crash_point_resumes_without_sending_again(
    transport: str, crash: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: Any
) -> None:
    url, ledger = server_for(transport, tmp_path, monkeypatch, request)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    import mcp_pai_agent

    with WireServer() as server:
        server.push(*replies())
        env = {**os.environ, "PAI_BASE_URL": server.url, "STEAD_CRASH_AT": crash}
        if url:
            env["STEAD_MCP_URL"] = url
        died = await asyncio.to_thread(_run_killed, store, env)
        assert died.returncode == -9, died.stdout + died.stderr
        view, log = await _resume(store, mcp_pai_agent.build(server.url, mcp_url=url))
        sent_back = str(server.requests[-1].body["messages"])
        asked = len(server.requests)
    assert view.status is RunStatus.COMPLETED, view.error
    (send,) = [e for e in log if e.kind == "tool_call_requested" and e.name == "send_message"]  # type: ignore[attr-defined]
    key = send.idempotency_key  # type: ignore[attr-defined]
    # Sent once, whichever side of the call the process died on: a send in flight was found
    # by the reconcile function (by its key), not sent again.
    assert len(ledger_rows(ledger, "done", "send_message", key)) == 1
    assert len(ledger_rows(ledger, "started", "send_message", key)) == 1
    if crash.startswith("after_tool_effect"):
        assert "sent to ada@example.com" in sent_back  # the reconcile function's result
    assert asked == 2  # the recorded first reply was not asked for again
