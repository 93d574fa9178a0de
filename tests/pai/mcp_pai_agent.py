"""A Pydantic AI agent whose tools are a real MCP server's (``tests/mcp_tools/mcp_server.py``:
over streamable HTTP when ``STEAD_MCP_URL`` names a running one, else over stdio, a child
process), for the tests and their child processes.

Its model is Pydantic AI's own ``AnthropicModel`` pointed at the suite's wire server
(``PAI_BASE_URL``). Effect classes come from the server's annotations (``lookup_order`` is
read-only, ``upsert_ticket`` idempotent) and, for ``send_message``, from a ``SetToolMetadata``
capability that also gives it a reconcile function: it asks the server's ledger
(``STEAD_MCP_LEDGER``) whether a message with the call's idempotency key went out.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.capabilities import SetToolMetadata
from pydantic_ai.mcp import MCPToolset

import stead
from stead.pydantic_ai import SteadDurability, send_idempotency_key

SERVER = Path(__file__).parent.parent / "mcp_tools" / "mcp_server.py"


def sent(to: str, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
    """Did the server send the message of this call (its idempotency key)?"""
    path = Path(os.environ.get("STEAD_MCP_LEDGER", os.devnull))
    lines = path.read_text().splitlines() if path.exists() else []
    for row in (json.loads(line) for line in lines if line):
        if (row["tool"], row["event"], row["key"]) == ("send_message", "done", ctx.idempotency_key):
            return stead.Done(f"sent to {to}")
    return stead.NotDone()


def orders(url: str | None = None) -> MCPToolset[Any]:
    """The server's toolset: at ``url`` (streamable HTTP: ``MCPToolset`` with a URL, Pydantic
    AI's successor of ``MCPServerStreamableHTTP``), else a stdio child of its own."""
    url = url or os.environ.get("STEAD_MCP_URL")
    if url:
        return MCPToolset(url, id="orders", process_tool_call=send_idempotency_key)
    transport = StdioTransport(command=sys.executable, args=[str(SERVER)], env=dict(os.environ))
    return MCPToolset(transport, id="orders", process_tool_call=send_idempotency_key)


def claude(url: str) -> Any:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    return AnthropicModel(
        "claude-sonnet-4-6", provider=AnthropicProvider(api_key="sk-ant-test", base_url=url)
    )


def build(url: str | None = None, mcp_url: str | None = None) -> Agent[None, str]:
    return Agent(
        claude(url or os.environ.get("PAI_BASE_URL", "http://127.0.0.1:9")),
        name="orders_desk",
        toolsets=[orders(mcp_url)],
        capabilities=[
            SteadDurability(),
            SetToolMetadata(tools=["send_message"], stead={"reconcile": sent}),
        ],
    )


agent = build() if os.environ.get("PAI_BASE_URL") else None
