"""The ``stead`` command, run as a real process: the demo, listing, timelines, errors."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import stead
from stead.testing import Reply, ScriptedModel

STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]


def stead_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STEAD, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "160", **(env or {})},
    )


def test_demo_recovers_and_delivers_once(tmp_path: Path) -> None:
    done = stead_cli("demo", "--db", str(tmp_path / "demo.db"))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "worker 1 killed by SIGKILL; messages delivered so far: 1" in out
    assert "recovered by reconcile" in out
    assert "took over" in out
    assert out.rstrip().splitlines()[-3:] and "delivered: 1" in out
    assert "delivered: 2" not in out


def _make_run(store: str) -> str:
    agent = stead.Agent("cli-agent", ScriptedModel([Reply(text="hello there")]))

    async def go() -> str:
        async with stead.Runtime(store, agents=[agent]) as rt:
            rid = await rt.start(agent, "say hello", run_id="run_cli_1")
            await rt.run(rid)
            return rid

    return asyncio.run(go())


def test_runs_list_show_events(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    rid = _make_run(store)
    listed = stead_cli("--store", store, "runs", "list")
    assert listed.returncode == 0 and rid in listed.stdout and "completed" in listed.stdout
    shown = stead_cli("--store", store, "runs", "show", rid)
    assert shown.returncode == 0, shown.stderr
    for word in ("created", "started", "turn 0", "assistant", "completed", "hello there"):
        assert word in shown.stdout
    raw = stead_cli("--store", store, "runs", "events", rid, "--json")
    lines = raw.stdout.strip().splitlines()
    assert raw.returncode == 0 and len(lines) == 5 and '"kind": "run_created"' in lines[0]


def test_cli_errors_say_what_to_do(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    missing = stead_cli("--store", store, "runs", "show", "run_nope")
    assert missing.returncode == 2
    assert "not found" in missing.stdout and "runs list" in missing.stdout
    bad_store = stead_cli("--store", "redis://x", "runs", "list")
    assert bad_store.returncode == 2 and "sqlite:///" in bad_store.stdout
    rid = _make_run(store)
    approve = stead_cli("--store", store, "approve", rid, "call_0_0")
    assert approve.returncode == 2 and "no pending approval" in approve.stdout
    agents = stead_cli("--store", store, "resume", rid, "--agents", "nope")
    assert agents.returncode == 2 and "module:attribute" in agents.stdout


def test_resume_from_the_cli_after_a_crash(tmp_path: Path) -> None:
    """A worker dies mid-run; `stead resume` with the agent's module finishes it."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    script = (
        "import asyncio, stead\n"
        "from stead.demo._agent import build_agent\n"
        "a = build_agent()\n"
        "async def go():\n"
        f"    async with stead.Runtime({store!r}, agents=[a]) as rt:\n"
        "        rid = await rt.start(a, 'Order 42', run_id='run_cli_crash')\n"
        "        await rt.run(rid)\n"
        "asyncio.run(go())\n"
    )
    env = {**os.environ, "STEAD_CRASH_AT": "after_result_commit:lookup_order"}
    died = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert died.returncode == -9, died.stderr
    from stead.demo._service import MessageService

    with MessageService() as service:
        done = stead_cli(
            "--store",
            store,
            "resume",
            "run_cli_crash",
            "--agents",
            "stead.demo._agent:agents",
            env={"STEAD_DEMO_SERVICE": service.url},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "completed" in done.stdout
        assert len(service.messages) == 1


APPROVAL_AGENT = '''
import stead
from stead.testing import Reply, ScriptedModel

@stead.tool(effect="non_idempotent", requires_approval=lambda a: a["cents"] > 10_000)
def refund(order_id: int, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents}"

agents = [stead.Agent("cli-refunds", ScriptedModel(
    [Reply(tool_calls=[("refund", {"order_id": 1, "cents": 20_000})]), "Done."]), [refund])]
'''


def test_approve_from_the_cli_and_see_it_in_the_timeline(tmp_path: Path) -> None:
    (tmp_path / "refund_agent.py").write_text(APPROVAL_AGENT)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {"PYTHONPATH": str(tmp_path)}
    script = (
        "import asyncio, stead, refund_agent\n"
        "a = refund_agent.agents[0]\n"
        "async def go():\n"
        f"    async with stead.Runtime({store!r}, agents=[a]) as rt:\n"
        "        await rt.start(a, 'refund order 1', run_id='run_cli_refund')\n"
        "        print((await rt.run('run_cli_refund')).status.value)\n"
        "asyncio.run(go())\n"
    )
    first = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )
    assert first.stdout.strip() == "awaiting_approval", first.stderr
    shown = stead_cli("--store", store, "runs", "show", "run_cli_refund", env=env)
    assert "approval?" in shown.stdout and "waiting on a person: call call_0_0" in shown.stdout
    bad = stead_cli(
        "--store", store, "approve", "run_cli_refund", "call_0_0", "--args", "{not json", env=env
    )
    assert bad.returncode == 2 and "--args is not JSON" in bad.stdout
    done = stead_cli(
        "--store",
        store,
        "approve",
        "run_cli_refund",
        "call_0_0",
        "--agents",
        "refund_agent:agents",
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout and "Done." in done.stdout
    again = stead_cli("--store", store, "approve", "run_cli_refund", "call_0_0", env=env)
    assert again.returncode == 2 and "no pending approval" in again.stdout
    shown = stead_cli("--store", store, "runs", "show", "run_cli_refund", env=env)
    assert "decided" in shown.stdout and "refunded 20000" in shown.stdout
