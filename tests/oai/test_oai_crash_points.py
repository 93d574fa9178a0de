"""Every named crash point of a turn, with an Agents SDK agent: a process driving its run is
SIGKILLed there, another resumes the run; the message is delivered exactly once, every call
has exactly one result, and the run completes.

Three turns (look the customer up; send the message; say so), so each point is reached at a
known place. Every point on SQLite driven by ``stead run`` / ``stead resume``; a spread of
them on PostgreSQL, in the ``effects`` durability mode, and driven by ``stead worker``
processes (``STEAD_TEST_ALL_MODES=1``: every point everywhere).
"""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import asyncio
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _oai_scripts import CUSTOMER, FOUND, MESSAGE, SENT, STEAD, deliveries, env, stead_cli
from wire_server import WireServer
from wire_shapes import openai_stream

from stead.core.events import ToolResultRecorded
from stead.runtime import OwnedRun
from stead.store import open_store
from stead.testing import assert_valid_history

HERE = Path(__file__).parent
SUPPORT = "oai_support:agent"
TOOLS = ("find_customer", "send_message")
CRASHES = [
    "mid_model_call#1",
    "mid_model_call#2",
    "mid_model_call#3",
    "after_intent#1",
    "after_intent#2",
    "after_tool_started:send_message",
    *[
        f"{p}:{t}"
        for p in ("after_tool_effect", "before_result_commit", "after_result_commit")
        for t in TOOLS
    ],
]
FULL = os.environ.get("STEAD_TEST_ALL_MODES") == "1"
SPREAD = ["after_intent#2", "after_tool_effect:send_message", "after_result_commit:send_message"]
CASES = [
    *[pytest.param("sqlite", "strict", c, id=f"sqlite-strict-{c}") for c in CRASHES],
    *[
        pytest.param("postgres", "strict", c, id=f"postgres-strict-{c}")
        for c in (CRASHES if FULL else SPREAD)
    ],
    *[
        pytest.param(s, "effects", c, id=f"{s}-effects-{c}")
        for s in ("sqlite", "postgres")
        for c in (CRASHES if FULL else ["after_tool_effect:send_message"])
    ],
]


def replies() -> list[Any]:
    return [
        openai_stream(tools=[(FOUND, "find_customer", [CUSTOMER])]),
        openai_stream(tools=[(SENT, "send_message", [MESSAGE])]),
        openai_stream("Ada has been told."),
    ]


def store_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


async def _final(store: str) -> tuple[Any, list[Any]]:
    s = open_store(store)
    try:
        runs = await s.list_runs()
        assert len(runs) == 1, runs
        state, _ = await OwnedRun.load_state(s, runs[0].run_id)
        return state, [e.event for e in await s.read_events(runs[0].run_id)]
    finally:
        await s.close()


def _check(store: str, ledger: Path, server: WireServer) -> None:
    state, events = asyncio.run(_final(store))
    assert state.status.value == "completed", state.error
    assert_valid_history(state)
    results = Counter(e.tool_call_id for e in events if isinstance(e, ToolResultRecorded))
    assert set(results) == {FOUND, SENT} and set(results.values()) == {1}
    assert len(deliveries(ledger)) == 1, "delivered exactly once"
    assert state.output == "Ada has been told."
    last = str(server.requests[-1].body["messages"])
    assert FOUND in last and SENT in last


def _rewind(server: WireServer, store: str) -> None:
    """Queue the replies of the turns the log has not recorded: a turn answered before the
    kill is replayed from the log, one the model was answering when killed is asked again."""
    _, events = asyncio.run(_final(store))
    recorded = sum(1 for e in events if e.kind == "assistant_message")
    while not server.replies.empty():
        server.replies.get_nowait()
    server.push(*replies()[recorded:])


@pytest.mark.parametrize(("kind", "mode", "crash"), CASES)
def test_killed_at_each_point_then_resumed(
    kind: str, mode: str, crash: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = store_url(kind, tmp_path, request)
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*replies())
        e = env(server.url, ledger, STEAD_DURABILITY=mode)
        died = stead_cli(
            "--store",
            store,
            "run",
            SUPPORT,
            "Tell Ada her refund is on its way.",
            env={**e, "STEAD_CRASH_AT": crash},
        )
        assert died.returncode == -9, f"{crash} never fired: {died.stdout}{died.stderr}"
        run_id = asyncio.run(_final(store))[0].run_id
        _rewind(server, store)
        done = stead_cli("--store", store, "resume", run_id, "--agents", SUPPORT, env=e)
        assert done.returncode == 0, done.stdout + done.stderr
        _check(store, ledger, server)


@pytest.mark.parametrize(
    ("kind", "crash"),
    [
        pytest.param("sqlite", "after_intent#2", id="sqlite-after_intent#2"),
        pytest.param("sqlite", "after_tool_effect:send_message", id="sqlite-after_tool_effect"),
        pytest.param("postgres", "after_tool_effect:send_message", id="postgres-after_tool_effect"),
    ],
)
def test_a_worker_killed_at_a_point_another_worker_finishes(
    kind: str, crash: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = store_url(kind, tmp_path, request)
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*replies())
        e = env(server.url, ledger)
        asyncio.run(_queue(store))
        worker = ["--store", store, "worker", "--agents", SUPPORT, "--poll", "0.1"]
        first = subprocess.run(
            [*STEAD, *worker],
            env={**e, "STEAD_CRASH_AT": crash},
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert first.returncode == -9, f"{crash} never fired: {first.stderr}"
        _rewind(server, store)
        second = subprocess.Popen(
            [*STEAD, *worker],
            env=e,
            cwd=HERE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_done(store)
        finally:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=60)
        _check(store, ledger, server)


async def _queue(store: str) -> None:
    import oai_support

    import stead

    async with stead.Runtime(store, agents=[oai_support.agent]) as rt:
        await rt.start(oai_support.agent, "Tell Ada her refund is on its way.")


def _wait_done(store: str, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        state, _ = asyncio.run(_final(store))
        if state.status.value in ("completed", "failed", "awaiting_approval"):
            return
        time.sleep(0.2)
    raise AssertionError("the second worker did not finish the run")
