"""OpenTelemetry spans of runs, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import stead
from stead.core.events import TraceLinked
from stead.core.messages import Usage
from stead.otel import Tracing
from stead.testing import Reply, ScriptedModel

USAGE = Usage(
    input_tokens=120, output_tokens=30, cache_read_input_tokens=100, cache_creation_input_tokens=7
)


@stead.tool(effect="idempotent_write")
def upsert_ticket(order_id: int, note: str) -> str:
    """Create or update the ticket of an order."""
    return f"T-{order_id}: {note}"


@stead.tool(effect="non_idempotent", requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


class Traced:
    def __init__(self, capture_content: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metrics = InMemoryMetricReader()
        meters = MeterProvider(metric_readers=[self.metrics])
        self.tracing = Tracing(
            tracer_provider=provider, meter_provider=meters, capture_content=capture_content
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def metric(self, name: str) -> int:
        data = self.metrics.get_metrics_data()
        total = 0
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        total += sum(int(p.value) for p in m.data.data_points)
        return total


async def tool_run(tmp_path: Path, traced: Traced) -> str:
    model = ScriptedModel(
        [
            Reply(tool_calls=[("upsert_ticket", {"order_id": 42, "note": "secret"})], usage=USAGE),
            Reply(text="Done.", usage=USAGE),
        ],
        name="claude-test",
    )
    agent = stead.Agent("support", model, [upsert_ticket])
    async with stead.Runtime(tmp_path / "r.db", agents=[agent], observers=[traced.tracing]) as rt:
        rid = await rt.start(agent, "Fix the ticket of order 42")
        assert (await rt.run(rid)).status is stead.RunStatus.COMPLETED
    return rid


async def test_the_span_tree_of_a_tool_run(tmp_path: Path) -> None:
    traced = Traced()
    rid = await tool_run(tmp_path, traced)
    spans = traced.spans()
    names = sorted(s.name for s in spans)
    assert names == [
        "chat claude-test",
        "chat claude-test",
        "execute_tool upsert_ticket",
        "invoke_agent support",
    ]
    root = next(s for s in spans if s.name == "invoke_agent support")
    assert root.parent is None
    for child in spans:
        assert child.context.trace_id == root.context.trace_id
        if child is not root:
            assert child.parent is not None and child.parent.span_id == root.context.span_id
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "support"
    assert root.attributes["stead.run.id"] == rid
    assert root.attributes["stead.run.status"] == "completed"
    assert traced.metric("stead.run.effects") == 3
    assert traced.metric("stead.run.steps") >= 4


async def test_attributes_follow_the_genai_conventions(tmp_path: Path) -> None:
    traced = Traced()
    rid = await tool_run(tmp_path, traced)
    spans = {s.name: s for s in traced.spans()}
    chat = spans["chat claude-test"].attributes
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "claude-test"
    assert chat["gen_ai.response.model"] == "claude-test"
    assert chat["gen_ai.usage.input_tokens"] == 120
    assert chat["gen_ai.usage.output_tokens"] == 30
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 100
    assert chat["gen_ai.usage.cache_creation.input_tokens"] == 7
    assert chat["gen_ai.response.finish_reasons"] in (("end_turn",), ("tool_use",))
    tool = spans["execute_tool upsert_ticket"].attributes
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert tool["gen_ai.tool.name"] == "upsert_ticket"
    assert tool["stead.tool.effect_class"] == "idempotent_write"
    async with stead.Runtime(tmp_path / "r.db") as rt:
        state = await rt.state(rid)
    (call,) = next(m for m in state.messages if getattr(m, "tool_calls", ())).tool_calls
    assert tool["gen_ai.tool.call.id"] == call.id
    assert len(str(tool["stead.tool.idempotency_key"])) == 64
    # Content only when asked for: no prompt, no arguments, no result.
    everything = json.dumps([dict(s.attributes or {}) for s in traced.spans()])
    assert "secret" not in everything and "Fix the ticket" not in everything


async def test_prompts_and_arguments_only_when_opted_in(tmp_path: Path) -> None:
    traced = Traced(capture_content=True)
    await tool_run(tmp_path, traced)
    spans = {s.name: s for s in traced.spans()}
    tool = spans["execute_tool upsert_ticket"].attributes
    assert json.loads(str(tool["gen_ai.tool.call.arguments"]))["note"] == "secret"
    assert tool["gen_ai.tool.call.result"] == "T-42: secret"
    chat = spans["chat claude-test"].attributes
    assert "Fix the ticket" in str(chat["gen_ai.input.messages"])


async def test_approvals_are_span_events_and_drives_one_trace(tmp_path: Path) -> None:
    traced = Traced()
    model = ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 1})]), "Refunded."])
    agent = stead.Agent("support", model, [refund])
    async with stead.Runtime(tmp_path / "r.db", agents=[agent], observers=[traced.tracing]) as rt:
        rid = await rt.start(agent, "Refund 1")
        view = await rt.run(rid)
        assert view.status is stead.RunStatus.AWAITING_APPROVAL
        pending = view.approvals[0]
        await rt.decide(rid, pending.tool_call_id, "approve", token=pending.token)
        assert (await rt.run(rid)).status is stead.RunStatus.COMPLETED
        linked = [s.event for s in await rt.events(rid) if isinstance(s.event, TraceLinked)]
    drives = [s for s in traced.spans() if s.name.startswith("invoke_agent")]
    assert len(drives) == len(linked) == 2
    assert [e.name for e in drives[0].events] == ["stead.approval.requested"]
    assert [e.name for e in drives[1].events] == ["stead.approval.decided"]
    assert len({d.context.trace_id for d in drives}) == 1, "one trace across drives"
    first, second = drives
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert second.links[0].context.span_id == first.context.span_id


async def test_a_cancel_is_a_span_event(tmp_path: Path) -> None:
    traced = Traced()
    running = asyncio.Event()

    @stead.tool(effect="read_only")
    async def wait(ctx: stead.ToolContext) -> str:
        """Wait until cancelled."""
        running.set()
        await ctx.signal.wait()
        return "stopped"

    model = ScriptedModel([Reply(tool_calls=[("wait", {})]), "never"])
    agent = stead.Agent("support", model, [wait])
    async with stead.Runtime(tmp_path / "r.db", agents=[agent], observers=[traced.tracing]) as rt:
        rid = await rt.start(agent, "Wait")
        driving = asyncio.ensure_future(rt.run(rid))
        await asyncio.wait_for(running.wait(), 10)
        await rt.cancel(rid, "the user gave up")
        assert (await asyncio.wait_for(driving, 30)).status is stead.RunStatus.CANCELLED
    (drive,) = [s for s in traced.spans() if s.name.startswith("invoke_agent")]
    cancelled = [e for e in drive.events if e.name == "stead.run.cancelled"]
    assert cancelled and cancelled[0].attributes["stead.reason"] == "the user gave up"


async def test_no_observer_no_trace_events(tmp_path: Path) -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[("upsert_ticket", {"order_id": 1, "note": "n"})]), "ok"]
    )
    agent = stead.Agent("support", model, [upsert_ticket])
    async with stead.Runtime(tmp_path / "r.db", agents=[agent]) as rt:
        rid = await rt.start(agent, "x")
        await rt.run(rid)
        kinds = [s.event.kind for s in await rt.events(rid)]
    assert "trace_linked" not in kinds and "tools_listed" not in kinds


async def test_an_observer_that_is_not_one_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(stead.UserError, match="not an observer"):
        stead.Runtime(tmp_path / "r.db", observers=[object()])  # type: ignore[list-item]
    with pytest.raises(stead.UserError, match="list of observers"):
        stead.Runtime(tmp_path / "r.db", observers=Traced().tracing)  # type: ignore[arg-type]


CHILD = Path(__file__).parents[1] / "mcp_tools" / "mcp_child.py"


def _spawn(store: Path, mode: str, spans: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), f"sqlite:///{store}", mode, str(spans)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, text: str, timeout: float = 60) -> list[dict[str, Any]]:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            found = [r for r in rows if text in json.dumps(r)]
            if found:
                return found
        time.sleep(0.05)
    raise AssertionError(f"{text} never appeared in {path}")


# Two child processes in turn, each paying stead's and the SDKs' imports, and waits of
# 60 + 30 + 60 s for their steps: on a busy machine the whole outlasts the default 120 s.
@pytest.mark.timeout(240)
async def test_a_run_killed_and_resumed_elsewhere_is_one_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker 1 is SIGKILLed in the middle of a tool call: its drive span never ends, but the
    spans it finished (the model calls) and every span of worker 2 share one trace id, and
    worker 2's drive links to worker 1's."""
    ledger, spans, store = tmp_path / "ledger.jsonl", tmp_path / "spans.jsonl", tmp_path / "r.db"
    monkeypatch.setenv("STEAD_MCP_LEDGER", str(ledger))
    first = _spawn(store, "start", spans, STEAD_MCP_HANG="upsert_ticket")
    try:
        started = await asyncio.to_thread(_wait_for, ledger, "upsert_ticket")
    finally:
        first.kill()
        first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(started[0]["pid"]), signal.SIGKILL)  # its orphaned stdio server
    before = [json.loads(x) for x in spans.read_text().splitlines() if x.strip()]
    assert {s["name"] for s in before} >= {"chat scripted", "execute_tool lookup_order"}
    second = _spawn(store, "run", spans)
    try:  # 120 s: the resumed process imports stead and the SDK before it runs
        _out, err = second.communicate(timeout=120)
    finally:  # not left running past the test
        if second.poll() is None:
            second.kill()
            second.communicate()
    assert second.returncode == 0, err
    every = [json.loads(x) for x in spans.read_text().splitlines() if x.strip()]
    assert len({s["context"]["trace_id"] for s in every}) == 1
    resumed = [s for s in every[len(before) :] if s["name"].startswith("invoke_agent")]
    assert len(resumed) == 1 and resumed[0]["links"], "the recovery drive links to the first"
    assert "stead.run.recovered" in [e["name"] for e in resumed[0]["events"]]
    tools = [s for s in every if s["name"] == "execute_tool upsert_ticket"]
    assert tools[-1]["attributes"]["stead.tool.idempotency_key"] == started[0]["key"]
