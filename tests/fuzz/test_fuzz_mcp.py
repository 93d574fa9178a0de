"""MCP fuzzer: servers that misbehave in hypothesis-chosen ways (``hostile_server.py``, a real
child process speaking JSON-RPC by hand): hangs, cursors that loop or run on, listings and
results of any JSON shape, extra tools with any schema, huge results, noise on stdout.

The promise: ``MCPTools.start`` either lists tools or raises an ``MCPServerError`` (or a
``UserError``) naming the server, within its bounded times, never anything else and never
forever; a run over tools it listed ends at rest, each call's recorded result within the
bound, whatever the server answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from _fuzz import check, fuzz_settings, run_example, timeout_for, violated
from hypothesis import example, given
from hypothesis import strategies as st

import stead
from stead.core.events import ToolResultRecorded
from stead.mcp import MCPServerError, MCPTools
from stead.testing import Reply, ScriptedModel

pytestmark = pytest.mark.fuzz

HOSTILE = Path(__file__).parent.parent / "mcp_tools" / "hostile_server.py"
BOUND = 2_000
"""The agent's result bound in these runs (small, so a huge result is cheap to make)."""

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
schemas = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "properties": st.dictionaries(
                st.text(max_size=6),
                st.one_of(
                    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "x"])}),
                    st.fixed_dictionaries({"$ref": st.sampled_from(["#/$defs/a", "#", "#/x/y"])}),
                ),
                max_size=3,
            ),
            "$defs": st.fixed_dictionaries({"a": st.just({"type": "string"})}),
            "required": st.lists(st.text(max_size=6), max_size=2),
        },
    ),
)
tool_defs = st.fixed_dictionaries(
    {"name": st.one_of(st.sampled_from(["extra", "echo", "a.b", "x" * 70]), json_values)},
    optional={"inputSchema": schemas, "annotations": json_values, "description": json_values},
)
misbehaviours = st.fixed_dictionaries(
    {},
    optional={
        "hang": st.lists(st.sampled_from(["initialize", "tools/list", "tools/call"]), max_size=2),
        "cursor": st.one_of(st.sampled_from(["loop", "endless"]), st.integers(1, 4)),
        "listing": json_values,
        "tools": st.lists(tool_defs, max_size=2),
        "result": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {
                    "content": st.lists(
                        st.fixed_dictionaries(
                            {"type": st.just("text")}, optional={"text": json_values}
                        ),
                        max_size=2,
                    )
                },
                optional={"isError": json_values, "structuredContent": json_values},
            ),
        ),
        "huge": st.integers(0, 300_000),
        "noise": st.sampled_from(["", "not json", '{"jsonrpc": "2.0"}', "[1,2]"]),
    },
)


async def _example(config: dict[str, Any], folder: Path) -> None:
    tools = MCPTools.stdio(
        sys.executable,
        [str(HOSTILE), json.dumps(config)],
        name="hostile",
        env=dict(os.environ),
        connect_timeout=2.0 if "initialize" in config.get("hang", []) else 30.0,
        list_timeout=2.0,
        timeout=2.0,
        max_pages=6,
    )
    try:
        listed = await tools.start()
    except (MCPServerError, stead.UserError) as exc:
        check("'hostile'" in str(exc), f"{config!r:.300}: the error names no server: {exc}")
        return
    except Exception as exc:
        violated(f"{config!r:.300}: start raised {type(exc).__name__}: {exc!s:.300}")
    try:
        names = [t.name for t in listed if t.name in ("echo", "slow_read", "slow_write")]
        if not names:
            return
        calls = [(name, {"text": "hi"} if name == "echo" else {}) for name in names[:2]]
        model = ScriptedModel([Reply(tool_calls=calls), "done"])
        try:
            agent = stead.Agent("h", model, listed, limits=stead.Limits(max_tool_result=BOUND))
        except stead.UserError:
            return  # tools an Agent refuses (two of one name): said where the agent is built
        async with stead.Runtime(f"sqlite:///{folder / 'runs.db'}", agents=[agent]) as rt:
            view = await rt.run(await rt.start(agent, "go"))
            check(
                view.status in (stead.RunStatus.COMPLETED, stead.RunStatus.AWAITING_APPROVAL),
                f"{config!r:.300}: the run ended {view.status}: {view.error}",
            )
            for s in await rt.events(view.run_id):
                if isinstance(s.event, ToolResultRecorded):
                    check(
                        len(s.event.content) < BOUND + 400,
                        f"{config!r:.300}: a result of {len(s.event.content)} characters",
                    )
    finally:
        await tools.close()


@pytest.mark.timeout(timeout_for(300))
@fuzz_settings(12)
@example(config={"hang": ["initialize"]})
@example(config={"cursor": "loop"})
@example(config={"listing": {"tools": [{"name": 5}]}})
@example(config={"huge": 300_000})
@example(config={"hang": ["tools/call"]})
@given(config=misbehaviours)
def test_a_misbehaving_server_is_refused_or_bounded_never_a_hang_or_a_raw_error(
    config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("mcp")
    run_example(lambda: asyncio.run(_example(config, folder)))
