"""Toolsets stead cannot know the tools of before a run are refused when the agent is given
to a Runtime, saying what to do instead: the run loop must know every tool's effect class
before it records a reply that calls it. (MCP toolsets are listed then: test_pai_mcp.py.)"""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pathlib import Path
from typing import Any

from pydantic_ai import Agent, FunctionToolset, RunContext
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.test import TestModel

import stead
from stead.errors import UserError
from stead.pydantic_ai import SteadDurability


def test_a_dynamic_toolset_is_refused_with_what_to_do(tmp_path: Path) -> None:
    agent = Agent(TestModel(), name="dynamic", capabilities=[SteadDurability()])

    @agent.toolset
    def per_run(ctx: RunContext[None]) -> FunctionToolset[Any]:
        return FunctionToolset()

    with pytest.raises(UserError, match=r"dynamic toolset.*builds its tools per run"):
        stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent])


def test_an_mcp_server_that_cannot_be_listed_is_named(tmp_path: Path) -> None:
    server = MCPToolset("http://127.0.0.1:9/mcp", id="orders")  # nothing listens there
    agent = Agent(TestModel(), name="mcp", toolsets=[server], capabilities=[SteadDurability()])
    with pytest.raises(UserError, match=r"listing its MCP servers' tools failed"):
        stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent])


def test_a_queue_is_refused_saying_why(tmp_path: Path) -> None:
    agent = Agent(TestModel(), name="queued", capabilities=[SteadDurability()])

    @agent.tool_plain(metadata={"stead": {"effect": "read_only", "queue": "gpu"}})
    def render(scene: str) -> str:
        return scene

    with pytest.raises(UserError, match=r"queue is not supported.*executor pool"):
        stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent])
