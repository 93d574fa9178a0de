"""``stead answer`` and the question in ``stead runs show`` , as real
processes: the run asks in one, the CLI answers in another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]

AGENT = """
from typing import Literal

import stead
from stead.testing import Reply, ScriptedModel

def _answer(request):
    return "You said: " + request.messages[-1].content

agents = [stead.Agent("cli-asker", ScriptedModel([
    Reply(tool_calls=[("ask_user", {"question": "Gift wrap it?"})]),
    _answer,
]), [stead.question_tool(Literal["yes", "no"])])]
"""


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STEAD, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def test_a_question_shown_and_answered_from_the_cli(tmp_path: Path) -> None:
    (tmp_path / "ask_agent.py").write_text(AGENT)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {"PYTHONPATH": str(tmp_path)}
    script = (
        "import asyncio, stead, ask_agent\n"
        "a = ask_agent.agents[0]\n"
        "async def go():\n"
        f"    async with stead.Runtime({store!r}, agents=[a]) as rt:\n"
        "        await rt.start(a, 'ship it', run_id='run_cli_ask')\n"
        "        print((await rt.run('run_cli_ask')).status.value)\n"
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
    shown = _cli("--store", store, "runs", "show", "run_cli_ask", env=env)
    assert "question?" in shown.stdout and "Gift wrap it?" in shown.stdout
    assert "question for a person: call call_0_0 (ask_user): Gift wrap it?" in shown.stdout
    assert "stead answer run_cli_ask call_0_0 VALUE" in shown.stdout
    agents = ["--agents", "ask_agent:agents"]
    wrong = _cli("--store", store, "answer", "run_cli_ask", "call_0_0", "maybe", *agents, env=env)
    assert wrong.returncode == 2 and "does not fit" in wrong.stderr
    nothing = _cli("--store", store, "answer", "run_cli_ask", "call_9", "yes", *agents, env=env)
    assert nothing.returncode == 2 and "asked no question" in nothing.stderr
    done = _cli("--store", store, "answer", "run_cli_ask", "call_0_0", "yes", *agents, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout and "You said: yes" in done.stdout
    shown = _cli("--store", store, "runs", "show", "run_cli_ask", env=env)
    assert "call_0_0: answer by" in shown.stdout
