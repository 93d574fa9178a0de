"""MCP servers that misbehave (``hostile_server.py``, a real child process speaking JSON-RPC
by hand): every request ends in its time, a listing ends, what the server sends that does
not fit is a typed error naming it, and no result is kept bigger than its bound."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import stead
from stead.core.events import ToolResultRecorded
from stead.mcp import MCPServerError, MCPTools, ServerTimedOut
from stead.testing import Reply, ScriptedModel

HOSTILE = Path(__file__).parent / "hostile_server.py"
# Generous for a server that answers (a Python start on a loaded machine); a hanging one is
# found out when it passes, so the tests that hang wait about this long.
CONNECT = 20.0


def hostile(name: str = "hostile", **misbehaviour: Any) -> tuple[str, list[str]]:
    return sys.executable, [str(HOSTILE), json.dumps(misbehaviour)]


def server(options: dict[str, Any] | None = None, **misbehaviour: Any) -> MCPTools:
    command, args = hostile(**misbehaviour)
    options = {"connect_timeout": CONNECT, "list_timeout": CONNECT, **(options or {})}
    return MCPTools.stdio(command, args, name="hostile", env=dict(os.environ), **options)


async def test_a_server_that_never_answers_initialize_is_given_up() -> None:
    tools = server({"connect_timeout": 1.0}, hang=["initialize"])
    with pytest.raises(ServerTimedOut, match=r"MCP server 'hostile'.*initialize within 1s"):
        await tools.start()


async def test_a_server_that_never_answers_the_listing_is_given_up() -> None:
    tools = server({"list_timeout": 1.0}, hang=["tools/list"])
    with pytest.raises(ServerTimedOut, match=r"MCP server 'hostile'.*tools/list within 1s"):
        await tools.start()
    assert not tools.connection.alive  # its process was stopped with the refusal


async def test_a_cursor_given_twice_is_refused() -> None:
    with pytest.raises(MCPServerError, match=r"'hostile'.*cursor 'again' a second time"):
        await server(cursor="loop").start()


async def test_a_listing_past_max_pages_is_refused() -> None:
    with pytest.raises(MCPServerError, match=r"'hostile'.*more than 5 pages"):
        await server({"max_pages": 5}, cursor="endless").start()


async def test_an_honest_listing_over_pages_is_read_whole() -> None:
    async with server(cursor=3) as tools:
        assert sorted(t.name for t in tools.tools()) == ["echo", "slow_read", "slow_write"]


@pytest.mark.parametrize(
    "listing",
    [
        {"tools": [{"name": 5}]},
        {"tools": "all of them"},
        {"tools": [{"name": "x", "inputSchema": "not a schema"}]},
        [1, 2, 3],
        "garbage",
        None,
    ],
)
async def test_a_malformed_listing_is_a_typed_error_naming_the_server(listing: Any) -> None:
    # A result that is an object of the wrong shape fails the SDK's validation; one that is
    # not an object at all the SDK drops, and the listing is never answered: its time ends it.
    fits = isinstance(listing, dict)  # answered at once: the full time, for a busy machine
    words = "does not fit the protocol" if fits else "within 3s"
    with pytest.raises(MCPServerError, match=rf"MCP server 'hostile'.*{words}"):
        await server({"list_timeout": CONNECT if fits else 3.0}, listing=listing).start()


async def test_a_tool_listed_twice_is_refused() -> None:
    echo = {"name": "echo", "inputSchema": {"type": "object"}}
    with pytest.raises(MCPServerError, match="lists the tool 'echo' more than once"):
        await server(tools=[echo]).start()


@pytest.mark.parametrize(
    "ref", ["#/$defs/missing", "#/properties/nowhere", "https://example.invalid/schema.json"]
)
async def test_a_schema_whose_ref_does_not_resolve_is_refused_at_listing(ref: str) -> None:
    bad = {
        "name": "lookup",
        "inputSchema": {"type": "object", "properties": {"id": {"$ref": ref}}},
    }
    with pytest.raises(MCPServerError, match=r"tool 'lookup'.*does not resolve"):
        await server(tools=[bad]).start()


async def test_a_ref_that_resolves_is_fine() -> None:
    good = {
        "name": "lookup",
        "inputSchema": {
            "type": "object",
            "properties": {"id": {"$ref": "#/$defs/id"}},
            "$defs": {"id": {"type": "integer"}},
        },
    }
    async with server(tools=[good]) as tools:
        assert "lookup" in [t.name for t in tools.tools()]


async def _drive(tmp_path: Path, tools: MCPTools, calls: list[Any], **limits: Any) -> Any:
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    agent = stead.Agent("h", model, tools.tools(), limits=stead.Limits(**limits))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "go"))
        results = [
            s.event for s in await rt.events(view.run_id) if isinstance(s.event, ToolResultRecorded)
        ]
        return view, results


async def test_a_call_that_never_answers_ends_at_its_timeout(tmp_path: Path) -> None:
    tools = server({"timeouts": {"slow_read": 1.0, "slow_write": 1.0}}, hang=["tools/call"])
    async with tools:
        view, results = await _drive(tmp_path, tools, [("slow_read", {})])
        assert view.status == stead.RunStatus.COMPLETED
        [result] = results
        assert result.is_error and "did not answer slow_read within 1s" in result.content
        # A call that may have happened on the server is not failed: a person decides.
        view, _ = await _drive(tmp_path, tools, [("slow_write", {})])
        assert view.status == stead.RunStatus.AWAITING_APPROVAL
        [pending] = view.approvals
        assert pending.tool == "slow_write"


async def test_a_result_that_is_no_result_is_an_error_the_model_reads(tmp_path: Path) -> None:
    async with server(result={"content": 5}) as tools:
        view, [result] = await _drive(tmp_path, tools, [("echo", {"text": "hi"})])
    assert view.status == stead.RunStatus.COMPLETED
    assert result.is_error and "MCP server 'hostile' answered echo with an error" in result.content


async def test_a_huge_result_is_cut_before_it_is_recorded(tmp_path: Path) -> None:
    async with server(huge=5_000_000) as tools:
        view, [result] = await _drive(
            tmp_path, tools, [("echo", {"text": "x"})], max_tool_result=100_000
        )
    assert view.status == stead.RunStatus.COMPLETED
    assert len(result.content) < 100_400 and result.content.startswith("x" * 100_000)
    assert _was(result.content) > 4_000_000  # what the model reads: how much there was


async def test_a_server_wide_bound_wins_over_the_agents(tmp_path: Path) -> None:
    async with server({"max_result": 1_000}, huge=2_000_000) as tools:
        _, [result] = await _drive(tmp_path, tools, [("echo", {"text": "x"})])
    assert len(result.content) < 1_400 and _was(result.content) > 1_000_000


def _was(content: str) -> int:
    """The length the cut note says the whole result had."""
    found = re.search(r"\[stead: this result was ([\d,]+) characters; only the first", content)
    assert found, content[-300:]
    return int(found.group(1).replace(",", ""))


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout", 0),
        ("timeout", float("inf")),
        ("timeout", None),
        ("connect_timeout", -1),
        ("list_timeout", "5"),
        ("timeouts", {"echo": float("nan")}),
        ("max_pages", 0),
        ("max_result", 0),
        ("max_result", 1.5),
    ],
)
def test_the_bounds_are_checked_where_they_are_given(option: str, value: Any) -> None:
    command, args = hostile()
    with pytest.raises(stead.UserError, match=option.split("[")[0]):
        MCPTools.stdio(command, args, name="hostile", **{option: value})
