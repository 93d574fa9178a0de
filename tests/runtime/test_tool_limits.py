"""Tool time limits and retries: ``@tool(timeout=..., retries=...)``.

A timeout aborts the call through its signal, as a cancel does, so the process group a tool
started is killed (a real group, looked for in /proc); a failed attempt runs again with
backoff only where its effect class allows (a ``non_idempotent`` call only once its reconcile
function said the failed attempt did not happen); each attempt is in the log."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import stead
from _wait import until_async
from stead.core.events import (
    EffectReconciled,
    ToolAttemptFailed,
    ToolCallStarted,
    ToolReconciled,
    ToolResultRecorded,
)
from stead.core.states import RunStatus
from stead.runtime import Backoff
from stead.testing import Reply, ScriptedModel, assert_valid_history

FAST = Backoff(base=0.001, cap=0.002)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


async def _run(store: str, agent: stead.Agent) -> tuple[stead.RunView, list[object]]:
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "go")
        view = await rt.run(rid)
        assert_valid_history(await rt.state(rid))
        return view, [e.event for e in await rt.events(rid)]


async def test_a_timeout_kills_the_tools_subprocess_group(store: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "group.pid"

    @stead.tool(effect="read_only", timeout=0.5)
    async def crunch(ctx: stead.ToolContext) -> str:
        """Crunch numbers in a shell pipeline that never ends."""
        script = f"echo $$ > {pidfile}; sleep 600 & sleep 600 | cat; wait"
        done = await ctx.run_subprocess(["sh", "-c", script])
        return f"exit {done.returncode}"

    model = ScriptedModel([Reply(tool_calls=[("crunch", {})]), "gave up"])
    agent = stead.Agent("cruncher", model, [crunch], limits=stead.Limits(cancel_grace=0.2))
    view, events = await _run(store, agent)
    assert view.status is RunStatus.COMPLETED and view.output == "gave up"
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert result.is_error and "took longer than its limit of 0.5s" in result.content
    pgid = int(pidfile.read_text())
    # the kernel reaps the group's last members a moment later
    await until_async(
        lambda: not _group_members(pgid), "the group's last members reaped", timeout=2
    )
    assert _group_members(pgid) == []


async def test_a_sync_tool_that_times_out_is_a_failed_attempt(store: str) -> None:
    @stead.tool(effect="read_only", timeout=0.2)
    def spin(ctx: stead.ToolContext) -> str:
        """Poll until aborted, as a well-behaved sync tool does."""
        while not ctx.aborted:
            time.sleep(0.01)
        raise stead.Aborted(ctx.signal.reason)

    model = ScriptedModel([Reply(tool_calls=[("spin", {})]), "ok"])
    view, events = await _run(store, stead.Agent("spinner", model, [spin]))
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert result.is_error and result.content.startswith("timed out")
    assert view.status is RunStatus.COMPLETED


async def test_retries_with_backoff_record_every_attempt(store: str) -> None:
    tries: list[int] = []

    @stead.tool(effect="read_only", retries=3, timeout=5)
    def flaky(ctx: stead.ToolContext) -> str:
        """Fails twice, then works."""
        tries.append(ctx.attempt)
        if len(tries) < 3:
            raise ConnectionError(f"try {len(tries)} failed")
        return "ok at last"

    model = ScriptedModel([Reply(tool_calls=[("flaky", {})]), "done"])
    view, events = await _run(store, stead.Agent("flaky", model, [flaky]))
    assert view.status is RunStatus.COMPLETED
    assert tries == [1, 2, 3]
    failed = [e for e in events if isinstance(e, ToolAttemptFailed)]
    assert [(e.attempt, e.error) for e in failed] == [
        (1, "ConnectionError: try 1 failed"),
        (2, "ConnectionError: try 2 failed"),
    ]
    assert all(0 <= e.retry_in <= FAST.cap for e in failed)
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert (result.content, result.attempt, result.is_error) == ("ok at last", 3, False)


async def test_retries_run_out_and_the_last_failure_is_the_result(store: str) -> None:
    @stead.tool(effect="idempotent_write", retries=1)
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("down")

    model = ScriptedModel([Reply(tool_calls=[("broken", {})]), "done"])
    _, events = await _run(store, stead.Agent("broken", model, [broken]))
    assert [e.attempt for e in events if isinstance(e, ToolAttemptFailed)] == [1]
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert (result.content, result.attempt, result.is_error) == ("RuntimeError: down", 2, True)


@pytest.mark.parametrize("happened", [False, True])
async def test_a_non_idempotent_retry_asks_its_reconcile_function_first(
    store: str, happened: bool
) -> None:
    sent: list[int] = []

    def was_sent(ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
        return stead.Done("sent (found by reconcile)") if happened else stead.NotDone()

    @stead.tool(retries=2, reconcile=was_sent)
    def send(ctx: stead.ToolContext) -> str:
        """Send a message (the first attempt fails)."""
        sent.append(ctx.attempt)
        if len(sent) == 1:
            raise TimeoutError("gateway did not answer")
        return "sent"

    model = ScriptedModel([Reply(tool_calls=[("send", {})]), "done"])
    _, events = await _run(store, stead.Agent("sender", model, [send]))
    kinds = [
        (type(e).__name__, getattr(e, "attempt", getattr(e, "verdict", None)))
        for e in events
        if isinstance(e, ToolCallStarted | ToolAttemptFailed | ToolReconciled | ToolResultRecorded)
    ]
    if happened:
        assert sent == [1]  # never run again: reconcile found its effect
        assert kinds == [
            ("ToolCallStarted", 1),
            ("ToolAttemptFailed", 1),
            ("ToolReconciled", "done"),
            ("ToolResultRecorded", 1),
        ]
    else:
        assert sent == [1, 2]
        assert kinds == [
            ("ToolCallStarted", 1),
            ("ToolAttemptFailed", 1),
            ("ToolReconciled", "not_done"),
            ("ToolCallStarted", 2),
            ("ToolResultRecorded", 2),
        ]


def test_bad_limits_are_refused_with_what_to_do() -> None:
    def f() -> str:
        return ""

    with pytest.raises(stead.UserError, match="timeout must be a positive number of seconds"):
        stead.tool(timeout=-1)(f)
    with pytest.raises(stead.UserError, match="timeout must be a positive"):
        stead.tool(timeout=float("inf"))
    with pytest.raises(stead.UserError, match="retries must be an int of at least 0"):
        stead.tool(effect="read_only", retries=-1)
    with pytest.raises(stead.UserError, match="need a reconcile function"):
        stead.tool(retries=2)(f)  # non_idempotent by default: no blind retry
    limited = stead.tool(effect="idempotent_write", retries=2, timeout=3)(f)
    # Read as the other options are: attributes (a method here would be truthy, never 3).
    assert (limited.retries, limited.timeout) == (2, 3)


def test_the_attempt_count_survives_a_sigkill(tmp_path: Path) -> None:
    """Attempt 1 fails (recorded), attempt 2 is SIGKILLed in flight: the next process's
    reconciler disposes of attempt 2 (its owner died with it), the call runs again as attempt
    3, never from attempt 1, and the call's one result is attempt 3's."""
    import os
    import subprocess
    import sys

    store = f"sqlite:///{tmp_path / 'runs.db'}"
    child = [sys.executable, str(Path(__file__).parent / "limits_child.py"), store]
    env = {**os.environ, "STEAD_TEST_MARK": str(tmp_path / "mark")}
    first = subprocess.run([*child, "start", "flaky"], env=env, capture_output=True, timeout=60)
    assert first.returncode == -9, first.stderr
    second = subprocess.run([*child, "run", "flaky"], env=env, capture_output=True, timeout=60)
    assert second.returncode == 0, second.stderr

    async def check() -> None:
        async with stead.Runtime(store) as rt:
            events = [e.event for e in await rt.events("run_limits")]
            assert_valid_history(await rt.state("run_limits"))
        assert [e.attempt for e in events if isinstance(e, ToolAttemptFailed)] == [1]
        (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
        assert (result.content, result.attempt) == ("ok on attempt 3", 3)
        (verdict,) = [e for e in events if isinstance(e, EffectReconciled)]
        assert (verdict.attempt, verdict.verdict) == (2, "dispose")

    asyncio.run(check())
