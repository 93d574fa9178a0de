"""A real MCP server (the mcp SDK's MCPServer) for the tests: stdio, or streamable HTTP.

    python mcp_server.py                 # stdio
    python mcp_server.py http PORT       # streamable HTTP on 127.0.0.1:PORT/mcp

Every call is written to the JSON-lines ledger ``STEAD_MCP_LEDGER`` (tool, the idempotency key
from the request's ``_meta``, this process's pid), so what the server did survives a SIGKILL
of it or of its client. ``STEAD_MCP_HANG`` names tools whose first call with a given key
writes ``started`` and then hangs (the test kills someone meanwhile); later calls answer.
``STEAD_MCP_VARIANT`` changes a description, to show a changed definition.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("orders")
LEDGER = os.environ.get("STEAD_MCP_LEDGER", os.devnull)
HANG = set(filter(None, os.environ.get("STEAD_MCP_HANG", "").split(",")))


def record(event: str, tool: str, ctx: Context, **extra: Any) -> None:
    meta = ctx.request_context.meta or {}
    row = {"event": event, "tool": tool, "key": meta.get("stead/idempotency_key"), **extra}
    row["pid"] = os.getpid()
    with open(LEDGER, "a") as f:
        f.write(json.dumps(row) + "\n")


def calls(tool: str, key: str | None) -> int:
    try:
        with open(LEDGER) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return 0
    return sum(1 for r in rows if r["tool"] == tool and r["key"] == key and r["event"] == "started")


async def maybe_hang(tool: str, ctx: Context) -> None:
    key = (ctx.request_context.meta or {}).get("stead/idempotency_key")
    first = calls(tool, key) == 0
    record("started", tool, ctx)
    if tool in HANG and first:
        await anyio.sleep(60)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def lookup_order(order_id: int, ctx: Context) -> str:
    """Look up an order's status."""
    await maybe_hang("lookup_order", ctx)
    record("done", "lookup_order", ctx)
    return f"order {order_id}: shipped"


description = "Create or update the ticket of an order."
if os.environ.get("STEAD_MCP_VARIANT"):
    description += " " + os.environ["STEAD_MCP_VARIANT"]


@server.tool(annotations=ToolAnnotations(idempotent_hint=True), description=description)
async def upsert_ticket(order_id: int, note: str, ctx: Context) -> str:
    await maybe_hang("upsert_ticket", ctx)
    record("done", "upsert_ticket", ctx)
    return f"ticket T-{order_id}: {note}"


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
async def send_message(to: str, body: str, ctx: Context) -> str:
    """Send a message (a new one on every call)."""
    await maybe_hang("send_message", ctx)
    record("done", "send_message", ctx)
    return f"sent to {to}"


@server.tool()
async def wait_forever(ctx: Context) -> str:
    """Wait until cancelled."""
    record("started", "wait_forever", ctx)
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        record("cancelled", "wait_forever", ctx)
        raise
    return "never"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run()
