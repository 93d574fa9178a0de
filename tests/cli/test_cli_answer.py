"""``stead answer`` and the question in ``stead runs show`` , as real
processes: the run asks in one, the CLI answers in another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import IO

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
    assert "question for a person (call call_0_0): Gift wrap it?" in shown.stdout
    assert "stead answer run_cli_ask call_0_0 ANSWER --agents MODULE:ATTR" in shown.stdout
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


def _worker(store: str, agents: str, env: dict[str, str], log: IO[str]) -> subprocess.Popen[bytes]:
    """A ``stead worker`` process, its output to ``log``."""
    return subprocess.Popen(
        [*STEAD, "--store", store, "worker", "--agents", agents, "--poll", "0.1"],
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


HELD_AGENT = """
import os
import time
from typing import Literal

import stead
from stead.testing import Reply, ScriptedModel


@stead.tool(effect="read_only")
def pack(order_id: int) -> str:
    \"\"\"Pack the order (until the file $PACK_GATE exists).\"\"\"
    while not os.path.exists(os.environ["PACK_GATE"]):
        time.sleep(0.02)
    return "packed"


def _answer(request):
    with open(os.environ["MODEL_CALLS"], "a") as f:
        f.write(repr(request.messages).replace("\\n", " ") + "\\n")
    return "Done."


agents = [stead.Agent("cli-held", ScriptedModel([
    Reply(tool_calls=[("ask_user", {"question": "Gift wrap it?"}), ("pack", {"order_id": 7})]),
    _answer,
]), [stead.question_tool(Literal["yes", "no"]), pack])]
"""


async def test_an_answer_to_a_run_a_worker_holds_is_recorded_and_left_to_the_worker(
    tmp_path: Path,
) -> None:
    """A worker holds the run (it packs the order, a sibling of the question) when the CLI
    answers: the CLI records the answer, says the worker goes on with the run, and exits 0;
    the worker finishes, and the model hears the answer once."""
    import asyncio

    import stead
    from _wait import until_async
    from stead.runtime import Runtime

    (tmp_path / "held_agent.py").write_text(HELD_AGENT)
    gate, calls = tmp_path / "gate", tmp_path / "calls.txt"
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {"PYTHONPATH": str(tmp_path), "PACK_GATE": str(gate), "MODEL_CALLS": str(calls)}
    sys.path.insert(0, str(tmp_path))
    try:
        import held_agent  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    agent = held_agent.agents[0]
    log = (tmp_path / "worker.log").open("w")
    worker = _worker(store, "held_agent:agents", env, log)
    try:
        async with Runtime(store, agents=[agent]) as rt:
            run_id = await rt.start(agent, "ship order 7")

            async def status(want: stead.RunStatus) -> stead.RunView | None:
                view = await rt.get(run_id)
                return view if view.status is want else None

            # The question is asked while the worker still packs.
            view = await until_async(
                lambda: status(stead.RunStatus.AWAITING_APPROVAL), "the question", timeout=60
            )
            record = await rt.store.get_run(run_id)
            assert view.status is stead.RunStatus.AWAITING_APPROVAL
            assert record.lease_owner is not None and record.lease_owner != rt.owner
            agents = ["--agents", "held_agent:agents"]
            answered = await asyncio.to_thread(
                _cli, "--store", store, "answer", run_id, "call_0_0", "yes", *agents, env=env
            )
            assert answered.returncode == 0, answered.stdout + answered.stderr
            assert "recorded" in answered.stdout
            assert f"its worker {record.lease_owner} goes on with it" in answered.stdout
            gate.touch()
            view = await until_async(
                lambda: status(stead.RunStatus.COMPLETED), "the run completed", timeout=60
            )
            assert view.status is stead.RunStatus.COMPLETED
        [heard] = calls.read_text().splitlines()  # one more model call, by the worker
        assert heard.count("yes") == 1
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        log.close()
