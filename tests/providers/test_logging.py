"""Logging of a full run at DEBUG: the run, turn and call ids on every record, and no API key,
bearer token or approval token anywhere in what was logged.

The run: the real Anthropic SDK against the local wire server (with an API key), an MCP server
over streamable HTTP (with a bearer token in its headers), and a tool that needs a person's
approval (a token), decided and finished.
"""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from wire_server import WireServer
from wire_shapes import anthropic_stream

import stead
from stead.mcp import MCPTools
from stead.providers.anthropic import AnthropicModel

sys.path.insert(0, str(Path(__file__).parents[1] / "mcp_tools"))
from _mcp import HttpServer

API_KEY = "sk-ant-api03-VERYSECRETKEY0123456789"
BEARER = "mcp-bearer-TOKEN-0123456789abcdef"


@stead.tool(effect="non_idempotent", requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order."""
    logging.getLogger("app.refunds").info("refunding order %s", order_id)
    return "refunded"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logs() -> Iterator[tuple[io.StringIO, Records]]:
    text = io.StringIO()
    handler = stead.configure_logging(logging.DEBUG, stream=text)
    records = Records()
    records.addFilter(stead.RunLogFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(records)
    try:
        yield text, records
    finally:
        root.removeHandler(handler)
        root.removeHandler(records)
        root.setLevel(level)


async def test_a_full_run_at_debug_logs_ids_and_no_secret(
    tmp_path: Path, logs: tuple[io.StringIO, Records], monkeypatch: pytest.MonkeyPatch
) -> None:
    text, records = logs
    monkeypatch.setenv("STEAD_MCP_LEDGER", str(tmp_path / "ledger.jsonl"))
    mcp_server = HttpServer(tmp_path / "m.log")
    mcp_server.start()
    tokens: list[str] = []
    try:
        with WireServer() as wire:
            wire.push(
                anthropic_stream(tools=[("toolu_1", "lookup_order", ['{"order_id": 42}'])]),
                anthropic_stream(tools=[("toolu_2", "refund", ['{"order_id": 42}'])]),
                anthropic_stream("Refunded order 42."),
            )
            model = AnthropicModel("claude-sonnet-4-6", api_key=API_KEY, base_url=wire.url)
            headers = {"Authorization": f"Bearer {BEARER}"}
            async with MCPTools.http(mcp_server.url, name="orders", headers=headers) as orders:
                agent = stead.Agent("support", model, [*orders.tools(), refund])
                async with stead.Runtime(tmp_path / "r.db", agents=[agent]) as rt:
                    rid = await rt.start(agent, "Refund order 42")
                    view = await rt.run(rid)
                    pending = view.approvals[0]
                    tokens.append(pending.token)
                    await rt.decide(rid, pending.tool_call_id, "approve", token=pending.token)
                    view = await rt.run(rid)
            assert view.status is stead.RunStatus.COMPLETED
            assert any(API_KEY in str(h) for s in wire.requests for h in s.headers.values())
    finally:
        mcp_server.kill()
    logged = text.getvalue()
    assert logged.count("\n") > 20, "DEBUG logs of the SDKs and stead were captured"
    for secret in (API_KEY, BEARER, *tokens):
        assert secret not in logged
        assert all(secret not in r.getMessage() for r in records.records)
    assert all(hasattr(r, "run_id") and hasattr(r, "call_id") for r in records.records)
    (refunding,) = [r for r in records.records if r.name == "app.refunds"]
    assert (refunding.run_id, refunding.turn, refunding.call_id) == (rid, "1", "toolu_2")  # type: ignore[attr-defined]
    assert any(r.run_id == rid and r.call_id == "model" for r in records.records)  # type: ignore[attr-defined]


def test_redact_hides_keys_and_bearer_tokens() -> None:
    line = f"headers={{'x-api-key': '{API_KEY}', 'authorization': 'Bearer {BEARER}'}}"
    clean = stead.redact(line)
    assert API_KEY not in clean and BEARER not in clean
    assert "[redacted]" in clean
    assert stead.redact("order 42 shipped") == "order 42 shipped"
