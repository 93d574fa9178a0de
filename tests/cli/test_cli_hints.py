"""Every next-step command the CLI prints works as printed: each scenario (a question, an
approval, a call whose outcome is unknown, a failed run) prints its commands, and the test
runs every one of them, word for word, and then the ones those print, until none is left.
``runs show``, ``runs watch`` and ``cancel``, given no ``--agents``, print the commands with
the ``--agents`` and ``--deps`` the run was started with (the run records them).

The agents need deps (``deps_type=Shop``), so every command that drives a run needs
``--deps``: a hint that drives must carry it. The CLI runs in this process (``main``) but for
the one ``stead run`` a crash point SIGKILLs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from stead.cli import main

AGENTS = '''
from dataclasses import dataclass
from typing import Literal

import stead
from stead.testing import Reply, ScriptedModel


@dataclass
class Shop:
    name: str


def make_shop():
    return Shop("shop")


@stead.tool(effect="read_only")
def status(order_id: int, ctx: stead.ToolContext[Shop]) -> str:
    """Look an order up."""
    return f"{ctx.deps.name}: shipped"


@stead.tool(effect="non_idempotent", requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order (a person approves)."""
    return "refunded"


@stead.tool(effect="non_idempotent")
def charge(cents: int) -> str:
    """Charge a card: nothing can tell afterwards whether it went through."""
    return "charged"


def _agent(name, replies):
    tools = [status, refund, charge, stead.question_tool(Literal["home", "office"])]
    limits = stead.Limits(approval_timeout=None)
    return stead.Agent(name, ScriptedModel(replies), tools, deps_type=Shop, limits=limits)


asker = _agent("asker", [
    Reply(tool_calls=[("status", {"order_id": 1})]),
    Reply(tool_calls=[("ask_user", {"question": "Home or office?"})]),
    lambda r: f"To your {r.messages[-1].content}.",
])
refunder = _agent("refunder", [Reply(tool_calls=[("refund", {"order_id": 1})]), "Done."])
charger = _agent("charger", [Reply(tool_calls=[("charge", {"cents": 500})]), "Charged."])
failer = _agent("failer", [Reply(text="Fine now.", error="bad_request", fail_times=1)])
'''

STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]
HINT = re.compile(r"`(stead [^`]+)`")


def _cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _follow(capsys: pytest.CaptureFixture[str], output: str, ran: list[str]) -> str:
    """Run every command ``output`` prints (and the ones they print), each as printed; an
    approval's deny is left for a second run of the same scenario, its approve run here."""
    last = output
    for hint in HINT.findall(output):
        words = shlex.split(hint)
        if words[1] == "deny":
            continue
        code, out = _cli(capsys, words[1:])
        assert code == 0, f"{hint!r} failed as printed:\n{out}"
        ran.append(words[1])
        last = _follow(capsys, out, ran)
    return last


def test_every_hint_the_cli_prints_works_as_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hint_shop.py").write_text(AGENTS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("COLUMNS", "80")  # hints are printed whole, never wrapped
    monkeypatch.delenv("STEAD_STORE", raising=False)
    store = ["--store", f"sqlite:///{tmp_path / 'shop.db'}"]
    deps = ["--deps", "hint_shop:make_shop"]
    ran: list[str] = []

    # A question: `stead run` prints the answer command, with --agents and --deps.
    code, out = _cli(capsys, [*store, "run", "hint_shop:asker", "Where to?", *deps])
    assert code == 1 and "question for a person" in out and "Home or office?" in out
    assert "--deps hint_shop:make_shop" in out
    assert "To your home." in _follow(capsys, out, ran)

    # An approval, approved as printed; a second one denied as printed.
    code, out = _cli(capsys, [*store, "run", "hint_shop:refunder", "Refund 1", *deps])
    assert "waits for approval" in out
    assert "completed" in _follow(capsys, out, ran)
    code, out = _cli(capsys, [*store, "run", "hint_shop:refunder", "Refund 2", *deps])
    (deny,) = [h for h in HINT.findall(out) if h.startswith("stead deny")]
    code, denied = _cli(capsys, shlex.split(deny)[1:])
    assert code == 0 and "completed" in denied, denied

    # A failed run: `stead run` says how to resume it.
    code, out = _cli(capsys, [*store, "run", "hint_shop:failer", "Hello", *deps])
    assert code == 1 and "failed" in out and "stead resume" in out
    assert "Fine now." in _follow(capsys, out, ran)

    # A call in flight when its process died: the resume finds its outcome unknown and
    # prints the `stead decide` that settles it.
    env = {**os.environ, "STEAD_CRASH_AT": "after_tool_started:charge", "PYTHONPATH": "."}
    crashed = subprocess.run(
        [*STEAD, *store, "run", "hint_shop:charger", "Pay", *deps],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert crashed.returncode == -9, crashed.stderr
    run_id = re.search(r"run (run_\w+)", crashed.stdout)
    assert run_id is not None
    resume = [*store, "resume", run_id.group(1)[:12], "--agents", "hint_shop:charger", *deps]
    code, out = _cli(capsys, resume)
    assert code == 0 and "may or may not have happened" in out, out
    assert "Charged." in _follow(capsys, out, ran)

    # `runs show`, `runs watch` and `cancel` are given no --agents: the commands they print
    # carry the ones the run was started with (it records them), and work as printed.
    for agent, waits in (("asker", "stead answer"), ("refunder", "stead approve")):
        code, out = _cli(capsys, [*store, "run", f"hint_shop:{agent}", "Again", *deps])
        started = re.search(r"run (run_\w+)", out)
        assert code == 1 and started is not None, out
        shown_id = started.group(1)[4:16]  # as `runs list` shows it
        code, shown = _cli(capsys, [*store, "runs", "show", shown_id])
        code, watched = _cli(capsys, [*store, "runs", "watch", shown_id])
        assert code == 0, watched
        for printed in (shown, watched):
            (hint,) = [h for h in HINT.findall(printed) if h.startswith(waits)]
            assert f"--agents hint_shop:{agent} --deps hint_shop:make_shop" in hint, hint
        assert "completed" in _follow(capsys, shown, ran)
    code, out = _cli(capsys, [*store, "run", "hint_shop:refunder", "Refund 3", *deps])
    started = re.search(r"run (run_\w+)", out)
    assert started is not None
    code, cancelled = _cli(capsys, [*store, "cancel", started.group(1)[4:16]])
    assert code == 0 and "cancelled" in cancelled, cancelled
    assert "--agents hint_shop:refunder" in cancelled  # `stead resume`, whole
    assert "completed" in _follow(capsys, cancelled, ran)

    assert sorted(set(ran)) == ["answer", "approve", "decide", "resume"]


def test_every_command_that_may_drive_a_run_takes_deps_and_no_reader_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    drivers = ["run", "resume", "approve", "deny", "decide", "answer", "worker", "serve"]
    for name in [*drivers, "executor"]:
        code, out = _cli(capsys, [name, "--help"])
        assert code == 0 and "--deps" in out, name
    for name in (["runs", "show"], ["runs", "list"], ["cancel"]):
        code, out = _cli(capsys, [*name, "--help"])
        assert code == 0 and "--deps" not in out, name
