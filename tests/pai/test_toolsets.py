"""Toolsets whose tools are known only once listed in a run (an MCP server's) are refused
when the agent is given to a Runtime, with what to do instead: the run loop must know every
tool's effect class before it records a reply, or each call would be refused as unknown."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.test import TestModel

import stead
from stead.errors import UserError
from stead.pydantic_ai import SteadDurability


def test_an_mcp_toolset_is_refused_with_what_to_do(tmp_path: Path) -> None:
    server = MCPToolset("http://127.0.0.1:9/mcp", id="orders")  # never connected
    agent = Agent(TestModel(), name="mcp", toolsets=[server], capabilities=[SteadDurability()])
    with pytest.raises(UserError, match=r"MCPToolset.*not supported.*stead.mcp.MCPTools"):
        stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent])
