"""The ``stead`` command, run as a real process: the demo, listing, timelines, errors."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

import stead
from _spawn import stead_cli as spawned_cli
from stead.cli import main
from stead.testing import Reply, ScriptedModel

STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]


def stead_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return spawned_cli(*args, env={**os.environ, "COLUMNS": "160", **(env or {})}, timeout=120)


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
    for word in ("created", "started", "turn 1", "assistant", "completed", "hello there"):
        assert word in shown.stdout
    raw = stead_cli("--store", store, "runs", "events", rid, "--json")
    lines = raw.stdout.strip().splitlines()
    assert raw.returncode == 0 and len(lines) == 6 and '"kind": "run_created"' in lines[0]


def test_cli_errors_say_what_to_do(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    rid = _make_run(store)
    missing = stead_cli("--store", store, "runs", "show", "run_nope")
    assert missing.returncode == 2
    assert "not found" in missing.stderr and "runs list" in missing.stderr
    bad_store = stead_cli("--store", "redis://x", "runs", "list")
    assert bad_store.returncode == 2 and "sqlite:///" in bad_store.stderr
    approve = stead_cli("--store", store, "approve", rid, "call_0_0")
    assert approve.returncode == 2 and "no pending approval" in approve.stderr
    agents = stead_cli("--store", store, "resume", rid, "--agents", "nope")
    assert agents.returncode == 2 and "module:attribute" in agents.stderr


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


# 300 s: it starts one process after another (a script, then the CLI again and again), each
# importing stead, and on a busy machine the sum outlasts the default 120 s.
@pytest.mark.timeout(300)
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
    assert "approval?" in shown.stdout
    assert "call call_0_0 (refund) waits for approval" in shown.stdout
    bad = stead_cli(
        "--store", store, "approve", "run_cli_refund", "call_0_0", "--args", "{not json", env=env
    )
    assert bad.returncode == 2 and "--args is not JSON" in bad.stderr
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
    assert again.returncode == 2 and "no pending approval" in again.stderr
    shown = stead_cli("--store", store, "runs", "show", "run_cli_refund", env=env)
    assert "decided" in shown.stdout and "refunded 20000" in shown.stdout


# -- stored text is text, closed pipes, arguments ------------------------------------------

MARKUP_AGENT = '''
import stead
from stead.testing import Reply, ScriptedModel

@stead.tool(effect="read_only")
def echo(text: str) -> str:
    """Echo."""
    return text

agent = stead.Agent("brackets[x]", ScriptedModel([
    Reply(text="see [bold]this[/bold] and [/]", tool_calls=[("echo", {"text": "[red]out[/red]"})]),
    "done [word] :smile: \\x1b[2Jafter",
]), [echo])
'''


def _markup_run(tmp_path: Path) -> tuple[str, dict[str, str]]:
    (tmp_path / "markup_agent.py").write_text(MARKUP_AGENT)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {"PYTHONPATH": str(tmp_path)}
    script = (
        "import asyncio, stead, markup_agent\n"
        "a = markup_agent.agent\n"
        "async def go():\n"
        f"    async with stead.Runtime({store!r}, agents=[a]) as rt:\n"
        "        await rt.run(await rt.start(a, 'prompt [word] [/]', run_id='run_[x]'))\n"
        "asyncio.run(go())\n"
    )
    made = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )
    assert made.returncode == 0, made.stderr
    return store, env


def test_stored_text_is_printed_as_text_not_markup(tmp_path: Path) -> None:
    """`[word]`, `[/]`, `:smile:` in a prompt, model text, a tool's output or an id are
    printed as they are; an ESC from the model is shown, not sent to the terminal."""
    store, env = _markup_run(tmp_path)
    shown = stead_cli("--store", store, "runs", "show", "run_[x]", env=env)
    assert shown.returncode == 0, shown.stderr
    for text in (
        "run_[x]",
        "agent brackets[x]: prompt [word] [/]",
        '"see [bold]this[/bold] and [/]"',
        "echo → [red]out[/red]",
        "done [word] :smile: \\x1b[2Jafter",
    ):
        assert text in shown.stdout, text
    assert "\x1b" not in shown.stdout and "😄" not in shown.stdout
    events = stead_cli("--store", store, "runs", "events", "run_[x]", env=env)
    assert events.returncode == 0 and "prompt [word] [/]" in events.stdout
    assert "[red]out[/red]" in events.stdout
    listed = stead_cli("--store", store, "runs", "list", env=env)
    assert "run_[x]" in listed.stdout and "brackets[x]" in listed.stdout
    missing = stead_cli("--store", store, "runs", "show", "[/]")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "run '[/]' not found" in missing.stderr


def _into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI writing to a pipe nobody reads any more (`stead ... | head` once head left)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [*STEAD, *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    rid = _make_run(store)
    for args in (
        ("runs", "events", rid),
        ("runs", "events", rid, "--json"),
        ("runs", "show", rid),
        ("runs", "list"),
    ):
        done = _into_a_closed_pipe("--store", store, *args)
        assert done.returncode == 141, (args, done.stderr)
        assert done.stderr == "", (args, done.stderr)


def _in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``main(args)`` in this process (argparse's refusals are SystemExit(2)): the many
    argument cases below would cost a second of interpreter start-up each as processes."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_unknown_statuses_and_bad_numbers_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    _make_run(store)
    bogus = stead_cli("--store", store, "runs", "list", "--status", "bogus")
    assert bogus.returncode == 2 and "invalid choice: 'bogus'" in bogus.stderr
    assert "awaiting_approval" in bogus.stderr and bogus.stdout == ""
    code, out, _ = _in_process(capsys, "--store", store, "runs", "list", "--status", "completed")
    assert code == 0 and "run_cli_1" in out
    for args, words in (
        (("runs", "list", "--limit", "-1"), "must be more than zero"),
        (("runs", "list", "--limit", "0"), "must be more than zero"),
        (("runs", "list", "--limit", "ten"), "is not a whole number"),
        (("runs", "list", "--limit", str(2**70)), "must be at most"),
        (("worker", "--agents", "m:a", "--concurrency", "0"), "must be more than zero"),
        (("worker", "--agents", "m:a", "--lease-ttl", "-2"), "must be more than zero"),
        (("worker", "--agents", "m:a", "--poll", "nan"), "must be more than zero"),
        (("worker", "--agents", "m:a", "--grace", "-1"), "must be zero or more"),
        (("worker", "--agents", "m:a", "--log-level", "loud"), "invalid choice: 'LOUD'"),
        # stead serve --worker takes the worker's options with the worker's checks
        (("serve", "--agents", "m:a", "--concurrency", "0"), "must be more than zero"),
        (("serve", "--agents", "m:a", "--concurrency", str(2**70)), "must be at most"),
        (("serve", "--agents", "m:a", "--poll", "-1"), "must be more than zero"),
        (("serve", "--max-body", "0"), "must be more than zero"),
        (("serve", "--heartbeat", "nan"), "must be more than zero"),
    ):
        code, _, err = _in_process(capsys, "--store", store, *args)
        assert code == 2 and words in err, (args, err)


def test_unknown_run_ids_are_a_message_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    _make_run(store)
    done = stead_cli("--store", store, "runs", "events", "run_nope")
    assert done.returncode == 2 and "run 'run_nope' not found" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    for args in (
        ("runs", "show", "run_nope"),
        ("runs", "events", "run_nope", "--json"),
        ("cancel", "run_nope"),
        ("deny", "run_nope", "call_0_0", "--reason", "no"),
        ("resume", "run_nope", "--agents", "stead.demo._agent:agents"),
    ):
        code, out, err = _in_process(capsys, "--store", store, *args)
        assert code == 2 and "run 'run_nope' not found" in err, (args, out, err)
        assert out == "", args


def test_an_empty_store_url_is_refused(tmp_path: Path) -> None:
    """Before, SQLite opened its private temporary database: the run 'succeeded' and was gone."""
    env = {"STEAD_STORE": ""}
    for args in (("--store", "", "runs", "list"), ("runs", "list")):
        done = subprocess.run(
            [*STEAD, *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
            env={**os.environ, **env},
        )
        assert done.returncode == 2, done.stdout
        assert "the store URL is empty" in done.stderr and "STEAD_STORE" in done.stderr
        assert "sqlite:///" in done.stderr
    ran = subprocess.run(
        [*STEAD, "run", "stead.demo.assistant:agent", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={**os.environ, **env},
    )
    assert ran.returncode == 2 and "the store URL is empty" in ran.stderr
    assert list(tmp_path.iterdir()) == []


BROKEN_MODULES = {
    "boom_at_import": ('raise RuntimeError("no database configured")\n', "agents"),
    "boom_factory": ('def make():\n    raise ValueError("missing setting X")\n', "make"),
    "boom_syntax": ("agents = (\n", "agents"),
    "boom_type": ("agents = 5\n", "agents"),
}


def test_agents_modules_that_fail_are_one_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    rid = _make_run(store)
    for name, (source, _) in BROKEN_MODULES.items():
        (tmp_path / f"{name}.py").write_text(source)
    expected = {
        "boom_at_import": "importing module 'boom_at_import' failed: RuntimeError: no database",
        "boom_factory": "make() raised ValueError: missing setting X",
        "boom_syntax": "importing module 'boom_syntax' failed: SyntaxError:",
        "boom_type": "is int, not an Agent, a list of Agents",
    }
    for name, (_, attr) in BROKEN_MODULES.items():
        for cmd in (("resume", rid), ("worker",)) if name == "boom_factory" else (("resume", rid),):
            done = stead_cli(
                "--store",
                store,
                *cmd,
                "--agents",
                f"{name}:{attr}",
                env={"PYTHONPATH": str(tmp_path)},
            )
            assert done.returncode == 2, (name, cmd, done.stderr)
            assert "Traceback" not in done.stderr
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and expected[name] in lines[0], (name, lines)
            assert f"--agents {name}:{attr}" in lines[0]
