"""``stead executor``: a real process serving a queue, stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stead
from _wait import until_async
from stead.cli import main
from stead.core.events import ToolResultRecorded
from stead.store import open_store
from stead.store.ledger._ledger import ledger_for

STEAD = str(Path(sys.executable).with_name("stead"))
RUNTIME_TESTS = Path(__file__).resolve().parents[1] / "runtime"
sys.path.insert(0, str(RUNTIME_TESTS))

from _pool_scenario import QUEUE, agent  # noqa: E402


def spawn(url: str) -> subprocess.Popen[str]:
    """``stead executor`` in the runtime tests' folder (``--agents`` imports from there)."""
    return subprocess.Popen(
        [STEAD, "--store", url, "executor", "--agents", "_pool_scenario:agents",
         "--queues", QUEUE, "--poll", "0.05", "--log-level", "warning"],
        cwd=RUNTIME_TESTS, env={**os.environ}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


async def test_stead_executor_serves_its_queue_until_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's tool call is performed by the `stead executor` process (its pid is in the
    effect ledger); SIGTERM stops it cleanly (exit 0) and its lease ends at once."""
    monkeypatch.setenv("STEAD_TEST_EFFECTS", str(tmp_path / "effects.db"))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    proc = spawn(url)
    store = open_store(url)
    ledger = ledger_for(store)
    try:

        async def serving() -> bool:
            return await ledger.serves(QUEUE, now=time.time()) or proc.poll() is not None

        await until_async(serving, "the executor serving (or gone)", timeout=30)
        assert proc.poll() is None, proc.communicate()
        a = agent()
        async with stead.Runtime(url, agents=[a]) as rt:
            await rt.start(a, "go", run_id="r-cli")
            view = await rt.run("r-cli")
        assert view.status == stead.RunStatus.COMPLETED
        [entry] = stead.testing.SideEffects(tmp_path / "effects.db").entries("index_doc")
        assert entry["pid"] == proc.pid
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert not await ledger.serves(QUEUE, now=time.time())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        await ledger.close()
        await store.close()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("executor", "--agents", "m:a", "--queues", "q", "--concurrency", "0"), "more than zero"),
        (("executor", "--agents", "m:a", "--queues", "q", "--lease-ttl", "-1"), "more than zero"),
        (("executor", "--agents", "m:a", "--queues", "q", "--grace", "-1"), "zero or more"),
        (("executor", "--agents", "m:a", "--queues", "q", "--log-level", "x"), "invalid choice"),
    ],
)
def test_bad_options_are_refused(
    args: tuple[str, ...], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--store", f"sqlite:///{tmp_path / 'x.db'}", *args])
    assert exc.value.code == 2 and words in capsys.readouterr().err


def test_stead_executor_hands_its_deps_to_the_tools_it_runs(tmp_path: Path) -> None:
    """``--deps module:factory`` is called in the executor process, and a tool it performs
    reads that process's object as ``ctx.deps``, not the run owner's."""
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    import deps_scenario as ds

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    proc = subprocess.Popen(
        [STEAD, "--store", url, "executor", "--agents", "deps_scenario:agent",
         "--deps", "deps_scenario:make_db", "--queues", ds.QUEUE, "--poll", "0.05",
         "--log-level", "warning"],
        cwd=here, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    async def go() -> list[str]:
        store = open_store(url)
        ledger = ledger_for(store)
        try:

            async def serving() -> bool:
                return await ledger.serves(ds.QUEUE, now=time.time()) or proc.poll() is not None

            await until_async(serving, "the executor serving (or gone)", timeout=30)
            assert proc.poll() is None, proc.communicate()
            a = ds.agent()
            owner = ds.Db(name="owner", pid=os.getpid())
            async with stead.Runtime(url, agents=[a], deps=owner) as rt:
                await rt.start(a, "go", run_id="r-deps")
                assert (await rt.run("r-deps")).status == stead.RunStatus.COMPLETED
                events = await rt.events("r-deps")
            return [e.event.content for e in events if isinstance(e.event, ToolResultRecorded)]
        finally:
            await ledger.close()
            await store.close()

    try:
        assert asyncio.run(go()) == [f"executor {proc.pid}"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


@pytest.mark.parametrize("command", ["executor", "worker"])
def test_a_bad_deps_option_is_one_clear_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    here = str(Path(__file__).resolve().parent)
    sys.path.insert(0, here)
    args = ["--store", f"sqlite:///{tmp_path / 'x.db'}", command,
            "--agents", "deps_scenario:agent", "--deps", "deps_scenario:nothing"]  # fmt: skip
    if command == "executor":
        args += ["--queues", "q"]
    assert main(args) != 0
    assert "--deps deps_scenario:nothing: module 'deps_scenario' has no 'nothing'" in (
        capsys.readouterr().err
    )


def test_stead_executor_without_queues_says_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    args = ["--store", f"sqlite:///{tmp_path / 'x.db'}", "executor", "--agents",
            "deps_scenario:agent"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "needs --queues" in err and "stead executor serve" in err


def test_stead_executor_serve_performs_tools_over_http_until_sigterm() -> None:
    """`stead executor serve` as a real process: it wants a token, serves the agent's tools
    with its own deps to an ``HttpExecutor``, and exits 0 on SIGTERM."""
    from stead.core.effects import Assignment, AssignmentKey, ToolBody
    from stead.server._executor_http import HttpExecutor

    here = Path(__file__).resolve().parent
    base = [STEAD, "executor", "serve", "--agents", "deps_scenario:agent",
            "--deps", "deps_scenario:make_db", "--port", "0"]  # fmt: skip
    refused = subprocess.run(base, cwd=here, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "needs a token" in refused.stderr
    proc = subprocess.Popen(
        [*base, "--token", "owner:s3cret-s3cret-s3cret"],
        cwd=here, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("stead executor serve: http://127.0.0.1:"), proc.communicate()
        url = line.split(": ", 1)[1].strip()
        key = AssignmentKey(session_id="s", run_id="r-http", effect_id="e-http")
        body = ToolBody(
            tool_name="whose_db", definition_digest="", arguments="{}",
            effect_class="read_only", replay_policy="rerun", tool_call_id="c1",
            turn_index=0, idempotency_key="k1", attempt=1,
        )  # fmt: skip

        async def go() -> object:
            far = HttpExecutor(url, "s3cret-s3cret-s3cret")
            try:
                return await far.run(Assignment(key=key, body=body), signal=stead.AbortSignal())
            finally:
                await far.close()

        outcome = asyncio.run(go())
        assert getattr(outcome, "content", None) == f"executor {proc.pid}"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
