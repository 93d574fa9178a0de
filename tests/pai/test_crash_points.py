"""Every named crash point of a turn, with a Pydantic AI agent: a process driving its run is
SIGKILLed there, another resumes the run; the message is delivered exactly once, every call
has exactly one result, and the run completes.

Three turns (look the customer up; send the message; say so), so each point is reached at a
known place. On SQLite and PostgreSQL, in the ``strict`` and ``effects`` durability modes,
driven by ``stead run`` / ``stead resume`` and by ``stead worker`` processes.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import asyncio
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _scripts import CUSTOMER, MESSAGE, STEAD, calls_reply, deliveries, env, stead_cli, text_reply
from wire_server import WireServer

from stead.core.events import ToolResultRecorded
from stead.runtime import OwnedRun
from stead.store import open_store
from stead.testing import assert_valid_history

HERE = Path(__file__).parent
PROVIDER = "anthropic"
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
EFFECTS = [
    "after_intent#1",
    "after_result_commit:find_customer",
    "after_tool_effect:send_message",
    "before_result_commit:send_message",
]
"""In ``effects`` mode: kills while events are held in memory (an intent, a read_only
result) and at the non_idempotent call's boundaries, which that mode keeps durable."""

FULL = os.environ.get("STEAD_TEST_ALL_MODES") == "1"
"""Every point in every store, mode and driver (``make soak`` sets it); by default every
point on SQLite driven by ``stead run``, and a spread of them elsewhere."""
SPREAD = [
    "mid_model_call#2",
    "after_intent#2",
    "after_tool_started:send_message",
    "after_tool_effect:send_message",
    "before_result_commit:find_customer",
    "after_result_commit:send_message",
]
CASES = [
    *[pytest.param("sqlite", "strict", c, id=f"sqlite-strict-{c}") for c in CRASHES],
    *[
        pytest.param("postgres", "strict", c, id=f"postgres-strict-{c}")
        for c in (CRASHES if FULL else SPREAD)
    ],
    *[
        pytest.param(s, "effects", c, id=f"{s}-effects-{c}")
        for s in ("sqlite", "postgres")
        for c in (CRASHES if FULL else EFFECTS)
    ],
]


def replies() -> list[Any]:
    return [
        calls_reply(PROVIDER, ("toolu_1", "find_customer", CUSTOMER)),
        calls_reply(PROVIDER, ("toolu_2", "send_message", MESSAGE)),
        text_reply(PROVIDER, "Ada has been told."),
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
    assert set(results) == {"toolu_1", "toolu_2"} and set(results.values()) == {1}
    assert len(deliveries(ledger)) == 1, "delivered exactly once"
    assert state.output == "Ada has been told."
    # The last request carried both results under their ids, whatever was replayed.
    last = str(server.requests[-1].body["messages"])
    assert "toolu_1" in last and "toolu_2" in last


@pytest.mark.parametrize(("kind", "mode", "crash"), CASES)
def test_killed_at_each_point_then_resumed(
    kind: str, mode: str, crash: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = store_url(kind, tmp_path, request)
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*replies())
        e = env(PROVIDER, server.url, ledger, STEAD_DURABILITY=mode)
        died = stead_cli(
            "--store",
            store,
            "run",
            "support_agent:agent",
            "Tell Ada her refund is on its way.",
            env={**e, "STEAD_CRASH_AT": crash},
        )
        assert died.returncode == -9, f"{crash} never fired: {died.stdout}{died.stderr}"
        run_id = asyncio.run(_final(store))[0].run_id
        _rewind(server, store)
        done = stead_cli(
            "--store", store, "resume", run_id, "--agents", "support_agent:agent", env=e
        )
        assert done.returncode == 0, done.stdout + done.stderr
        _check(store, ledger, server)


def _rewind(server: WireServer, store: str) -> None:
    """Queue the replies of the turns the log has not recorded: a turn answered before the
    kill is replayed from the log, one the model was answering when killed is asked again."""
    _, events = asyncio.run(_final(store))
    recorded = sum(1 for e in events if e.kind == "assistant_message")
    while not server.replies.empty():
        server.replies.get_nowait()
    server.push(*replies()[recorded:])


@pytest.mark.parametrize(
    ("kind", "crash"),
    [
        *[pytest.param("sqlite", c, id=f"sqlite-{c}") for c in (CRASHES if FULL else SPREAD)],
        *[
            pytest.param("postgres", c, id=f"postgres-{c}")
            for c in (CRASHES if FULL else ("after_intent#2", "after_tool_effect:send_message"))
        ],
    ],
)
def test_a_worker_killed_at_each_point_another_worker_finishes(
    kind: str, crash: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = store_url(kind, tmp_path, request)
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*replies())
        e = env(PROVIDER, server.url, ledger)
        asyncio.run(_queue(store))
        worker = ["--store", store, "worker", "--agents", "support_agent:agent", "--poll", "0.1"]
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
    import support_agent

    import stead

    async with stead.Runtime(store, agents=[support_agent.agent]) as rt:
        await rt.start(support_agent.agent, "Tell Ada her refund is on its way.")


def _wait_done(store: str, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        state, _ = asyncio.run(_final(store))
        if state.status.value in ("completed", "failed", "awaiting_approval"):
            return
        time.sleep(0.2)
    raise AssertionError("the second worker did not finish the run")
