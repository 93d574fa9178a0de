"""MCP servers as tool sources, against real servers built with the mcp SDK (mcp_server.py):
over stdio (a child process) and streamable HTTP (a child process on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from _mcp import SERVER, HttpServer, Ledger
from mcp.types import ToolAnnotations
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import stead
from stead.cli._render import describe
from stead.core.events import ToolCallRequested, ToolsListed
from stead.mcp import MCPTools, effect_from_annotations
from stead.otel import Tracing
from stead.testing import Reply, ScriptedModel

LOOKUP_AND_UPSERT = [
    Reply(tool_calls=[("lookup_order", {"order_id": 42})]),
    Reply(tool_calls=[("upsert_ticket", {"order_id": 42, "note": "shipped"})]),
    "Order 42 shipped; ticket updated.",
]


def stdio(**options: Any) -> MCPTools:
    # The SDK gives a stdio server only a few safe variables unless told; it needs the ledger.
    env = dict(os.environ)
    return MCPTools.stdio(sys.executable, [str(SERVER)], name="orders", env=env, **options)


async def keys_of(rt: stead.Runtime, run_id: str) -> dict[str, str]:
    return {
        s.event.name: s.event.idempotency_key
        for s in await rt.events(run_id)
        if isinstance(s.event, ToolCallRequested)
    }


async def drive(tmp_path: Path, tools: MCPTools, script: list[Any], **agent: Any) -> Any:
    a = stead.Agent("mcp-agent", ScriptedModel(script), tools.tools(), **agent)
    async with stead.Runtime(tmp_path / "runs.db", agents=[a]) as rt:
        rid = await rt.start(a, "How is order 42?")
        view = await rt.run(rid)
        return view, await rt.events(rid), await keys_of(rt, rid)


def test_annotations_give_effect_classes() -> None:
    assert effect_from_annotations(None) == "non_idempotent"
    assert effect_from_annotations(ToolAnnotations(read_only_hint=True)) == "read_only"
    assert effect_from_annotations(ToolAnnotations(idempotent_hint=True)) == "idempotent_write"
    assert effect_from_annotations(ToolAnnotations(destructive_hint=False)) == "non_idempotent"
    both = ToolAnnotations(read_only_hint=True, idempotent_hint=True)
    assert effect_from_annotations(both) == "read_only"


async def test_stdio_server_lists_its_tools_with_effect_classes_and_overrides() -> None:
    async with stdio(effects={"send_message": "idempotent_write"}) as orders:
        effects = {t.name: t.effect_class for t in orders.tools()}
        assert effects == {
            "lookup_order": "read_only",
            "upsert_ticket": "idempotent_write",
            "send_message": "idempotent_write",  # overridden; its annotations say non_idempotent
            "wait_forever": "non_idempotent",
        }
        lookup = next(t for t in orders.tools() if t.name == "lookup_order")
        assert lookup.description == "Look up an order's status."
        assert lookup.parameters["properties"]["order_id"]["type"] == "integer"
        assert lookup.validate('{"order_id": "x"}')[1] is not None  # the model reads why
        assert lookup.validate('{"order_id": 7}') == ('{"order_id":7}', None)


async def test_an_unknown_tool_in_an_override_is_a_user_error() -> None:
    with pytest.raises(stead.UserError, match="does not list: nope"):
        async with stdio(effects={"nope": "read_only"}):
            pass


async def test_stdio_run_calls_the_tools_with_the_idempotency_key_in_meta(
    tmp_path: Path, ledger: Ledger
) -> None:
    async with stdio() as orders:
        view, events, keys = await drive(tmp_path, orders, LOOKUP_AND_UPSERT)
    assert view.status is stead.RunStatus.COMPLETED
    done = {r["tool"]: r["key"] for r in ledger.rows("done")}
    assert done == {"lookup_order": keys["lookup_order"], "upsert_ticket": keys["upsert_ticket"]}
    listed = [s.event for s in events if isinstance(s.event, ToolsListed)]
    assert [e.source for e in listed] == ["orders"]
    assert listed[0].tools["upsert_ticket"]["annotations"] == {"idempotentHint": True}
    assert listed[0].tools["upsert_ticket"]["effect_class"] == "idempotent_write"
    results = [s.event for s in events if s.event.kind == "tool_result_recorded"]
    assert [r.content for r in results] == ["order 42: shipped", "ticket T-42: shipped"]


async def test_http_server_lists_and_calls(
    tmp_path: Path, ledger: Ledger, http_server: HttpServer
) -> None:
    async with MCPTools.http(http_server.url, name="orders") as orders:
        assert {t.name: t.effect_class for t in orders.tools()}["lookup_order"] == "read_only"
        view, _, keys = await drive(tmp_path, orders, LOOKUP_AND_UPSERT)
    assert view.status is stead.RunStatus.COMPLETED
    assert [r["key"] for r in ledger.rows("done")] == [keys["lookup_order"], keys["upsert_ticket"]]


async def test_a_changed_definition_is_in_the_timeline(
    tmp_path: Path, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [Reply(tool_calls=[("send_message", {"to": "oncall", "body": "hi"})]), "Sent."]
    db = tmp_path / "runs.db"
    async with stdio(requires_approval={"send_message": True}) as orders:
        a = stead.Agent("mcp-agent", ScriptedModel(script), orders.tools())
        async with stead.Runtime(db, agents=[a]) as rt:
            rid = await rt.start(a, "Tell on-call")
            assert (await rt.run(rid)).status is stead.RunStatus.AWAITING_APPROVAL
    monkeypatch.setenv("STEAD_MCP_VARIANT", "(now with audit)")  # the server was redeployed
    async with stdio(requires_approval={"send_message": True}) as orders:
        a = stead.Agent("mcp-agent", ScriptedModel(script), orders.tools())
        async with stead.Runtime(db, agents=[a]) as rt:
            pending = (await rt.get(rid)).approvals[0]
            await rt.decide(rid, pending.tool_call_id, "approve", token=pending.token)
            assert (await rt.run(rid)).status is stead.RunStatus.COMPLETED
            listed = [s.event for s in await rt.events(rid) if isinstance(s.event, ToolsListed)]
    assert len(listed) == 2, "a drive records a listing only when it changed"
    before, after = (e.tools["upsert_ticket"]["description"] for e in listed)
    assert after == before + " (now with audit)"
    lines = [describe(e)[1] for e in listed]  # the timeline's words for them
    changed = [line.split(", ")[1] for line in lines]
    assert changed[0].startswith("upsert_ticket@") and changed[0] != changed[1]
    assert lines[0].split(", ")[0] == lines[1].split(", ")[0]  # lookup_order did not change


async def test_cancelling_the_run_cancels_the_call_on_the_server(
    tmp_path: Path, ledger: Ledger
) -> None:
    script = [Reply(tool_calls=[("wait_forever", {})]), "never"]
    async with stdio() as orders:
        a = stead.Agent("mcp-agent", ScriptedModel(script), orders.tools())
        async with stead.Runtime(tmp_path / "runs.db", agents=[a]) as rt:
            rid = await rt.start(a, "Wait")
            driving = asyncio.ensure_future(rt.run(rid))
            await asyncio.to_thread(ledger.wait_for, "started", "wait_forever")
            await rt.cancel(rid, "the user gave up")
            view = await asyncio.wait_for(driving, 30)
            assert view.status is stead.RunStatus.CANCELLED
            cancelled = await asyncio.to_thread(ledger.wait_for, "cancelled", "wait_forever")
    assert cancelled[0]["key"] == (await keys_of_db(tmp_path, rid))["wait_forever"]


async def keys_of_db(tmp_path: Path, run_id: str) -> dict[str, str]:
    async with stead.Runtime(tmp_path / "runs.db") as rt:
        return await keys_of(rt, run_id)


COMPLETED = stead.RunStatus.COMPLETED


def find_message(to: str, body: str) -> stead.Done | stead.NotDone:
    """Reconcile: the test's message service says the message went out."""
    return stead.Done(f"already sent to {to}")


@pytest.mark.parametrize(
    ("tool", "options", "status", "sent"),
    [
        # idempotent: sent again to the restarted server, with the same idempotency key
        ("upsert_ticket", {}, stead.RunStatus.COMPLETED, 2),
        # non_idempotent with no reconcile function: a person decides
        ("send_message", {}, stead.RunStatus.AWAITING_APPROVAL, 1),
        # non_idempotent with one: it answers, and nothing is sent twice
        (
            "send_message",
            {"reconcile": {"send_message": find_message}},
            stead.RunStatus.COMPLETED,
            1,
        ),
    ],
    ids=["idempotent_resent", "non_idempotent_asks", "non_idempotent_reconciled"],
)
async def test_stdio_server_killed_mid_call_is_restarted_and_the_call_recovered(
    tmp_path: Path,
    ledger: Ledger,
    monkeypatch: pytest.MonkeyPatch,
    tool: str,
    options: dict[str, Any],
    status: stead.RunStatus,
    sent: int,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.setenv("STEAD_MCP_HANG", tool)
    args = {"order_id": 42, "note": "n"} if tool == "upsert_ticket" else {"to": "a", "body": "b"}
    script = [Reply(tool_calls=[(tool, args)]), "Done."]
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing = Tracing(tracer_provider=provider)
    async with stdio(**options) as orders:
        a = stead.Agent("mcp-agent", ScriptedModel(script), orders.tools())
        async with stead.Runtime(tmp_path / "runs.db", agents=[a], observers=[tracing]) as rt:
            rid = await rt.start(a, "Go")
            driving = asyncio.ensure_future(rt.run(rid))
            started = await asyncio.to_thread(ledger.wait_for, "started", tool)
            os.kill(int(started[0]["pid"]), signal.SIGKILL)  # the server this test started
            view = await asyncio.wait_for(driving, 60)
            keys = await keys_of(rt, rid)
            if status is stead.RunStatus.AWAITING_APPROVAL:
                assert view.approvals[0].reason == "outcome_unknown"
    assert view.status is status
    rows = ledger.rows("started", tool)
    assert len(rows) == sent
    assert {r["key"] for r in rows} == {keys[tool]}
    assert len({r["pid"] for r in ledger.rows()}) == sent  # a second server process, if resent
    (drive,) = [x for x in spans.get_finished_spans() if x.name.startswith("invoke_agent")]
    noted = [e.name for e in drive.events]
    expected = {
        "idempotent_resent": [],
        "non_idempotent_asks": ["stead.tool.outcome_unknown", "stead.approval.requested"],
        "non_idempotent_reconciled": ["stead.tool.reconciled"],
    }
    tools = [x for x in spans.get_finished_spans() if x.name == f"execute_tool {tool}"]
    assert noted == expected[request.node.callspec.id]
    effect = "idempotent_write" if tool == "upsert_ticket" else "non_idempotent"
    assert tools and all(x.attributes["stead.tool.effect_class"] == effect for x in tools)


async def test_http_server_killed_mid_call_is_reconnected_and_the_call_resent(
    tmp_path: Path, ledger: Ledger, http_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_server.kill()
    monkeypatch.setenv("STEAD_MCP_HANG", "upsert_ticket")
    http_server.start()
    script = [Reply(tool_calls=[("upsert_ticket", {"order_id": 1, "note": "n"})]), "Done."]
    async with MCPTools.http(http_server.url, name="orders") as orders:
        a = stead.Agent("mcp-agent", ScriptedModel(script), orders.tools())
        async with stead.Runtime(tmp_path / "runs.db", agents=[a]) as rt:
            rid = await rt.start(a, "Go")
            driving = asyncio.ensure_future(rt.run(rid))
            await asyncio.to_thread(ledger.wait_for, "started", "upsert_ticket")
            await asyncio.to_thread(http_server.kill)
            await asyncio.to_thread(http_server.start)  # back on the same port
            view = await asyncio.wait_for(driving, 60)
            keys = await keys_of(rt, rid)
    assert view.status is stead.RunStatus.COMPLETED
    rows = ledger.rows("started", "upsert_ticket")
    assert len(rows) == 2 and {r["key"] for r in rows} == {keys["upsert_ticket"]}
    assert len(ledger.rows("done", "upsert_ticket")) == 1
