"""An OpenAI Agents SDK agent made durable by DBOS's integration and by stead, side by side.

    .venv/bin/python bench/under_openai_agents.py            # both parts, a markdown table
    .venv/bin/python bench/under_openai_agents.py --quick    # fewer runs: does it work at all
    .venv/bin/python bench/under_openai_agents.py --json     # machine-readable

Needs the openai-agents extra; the DBOS side needs the ``compare`` extra
(``dbos-openai-agents``), and is left out, saying so, where it does not install.

**The seed scenario.** One SDK agent (the SDK's ``agents.testing.ScriptedModel``, each reply
derived from the request: while no call has a result it asks for ``send_message``, then it
answers), one tool that delivers a message (a line appended, fsynced, to a file: the outside
world). The process is SIGKILLed inside the tool right after the delivery, before the engine
records the call's result; a new process resumes the run. Counted: deliveries once the run
is finished.

* **dbos**: ``DBOSRunner.run`` inside a ``@DBOS.workflow`` on a SQLite system database; the
  delivery is a ``@DBOS.step`` (the integration does not wrap function tools: its docs have the
  user make them steps). The second process ``DBOS.launch()``es, which recovers the pending
  workflow, and awaits it.
* **stead**: ``stead.openai_agents.durable`` with ``send_message`` marked
  ``@effect("non_idempotent", reconcile=find_sent)`` on SQLite; the second process runs
  ``rt.resume``.

**Overhead per durable step.** The same agent with a tool that does nothing, 10 tool turns a
run (10 model requests that each ask for one call, the 10 calls, 1 final request: 21 steps),
runs back to back in one process: plain ``Runner.run`` (not durable), ``DBOSRunner.run`` in a
workflow (model requests are DBOS steps, the tool a ``@DBOS.step``), and stead (``strict``
and ``effects`` durability). The figure is the median over rounds of (batch time / runs /
21); "added" is that minus plain's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

import stead
import stead.openai_agents as sa

HERE = Path(__file__).resolve()
STEPS = 21
TURNS = 10
MESSAGE = {"to": "ada@example.com", "text": "Your refund is on its way."}


# -- the agent's model, the same for every engine ------------------------------------------------


def _model(turns: int, tool: str) -> ScriptedModel:
    """Replies derived from the request (a replayed engine skips the requests it recorded)."""

    def reply(call: Any) -> list[Any]:
        items = call.input if isinstance(call.input, list) else []
        n = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")
        if n < turns:
            args = MESSAGE if tool == "send_message" else {"n": n}
            return [function_call(tool, args, call_id=f"call_{n}")]
        return [assistant_message("done")]

    return ScriptedModel([ModelStep.respond(reply) for _ in range(turns + 1)])


# -- the seed scenario (each side in child processes) -------------------------------------------


def _deliveries(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(x) for x in ledger.read_text().splitlines() if x]


def _deliver(ledger: Path, key: str) -> int:
    n = len(_deliveries(ledger)) + 1
    with ledger.open("a") as f:
        f.write(json.dumps({"id": n, "key": key}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if os.environ.get("BENCH_KILL") == "1" and n == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # delivered; the engine has not recorded it
    return n


def _dbos_config(name: str, workdir: Path) -> Any:
    url = f"sqlite:///{workdir / 'dbos.db'}"
    return {"name": name, "system_database_url": url, "log_level": "WARNING"}


def _child_dbos(workdir: Path, phase: str) -> None:
    from dbos import DBOS, SetWorkflowID
    from dbos_openai_agents import DBOSRunner

    ledger = workdir / "deliveries.jsonl"
    DBOS(config=_dbos_config("seed", workdir))

    @DBOS.step()
    async def deliver(to: str, text: str) -> int:
        return _deliver(ledger, "dbos")

    @function_tool
    async def send_message(to: str, text: str) -> dict[str, Any]:
        """Send a customer a message."""
        return {"delivered": True, "id": await deliver(to, text)}

    agent = Agent(name="support", model=_model(1, "send_message"), tools=[send_message])

    @DBOS.workflow()
    async def support(prompt: str) -> str:
        return str((await DBOSRunner.run(agent, prompt)).final_output)

    async def go() -> None:
        DBOS.launch()  # the second time, this recovers the workflow the kill left pending
        if phase == "start":
            with SetWorkflowID("seed"):
                handle = await DBOS.start_workflow_async(support, "Tell Ada")
        else:
            handle = await DBOS.retrieve_workflow_async("seed")
        await handle.get_result()

    try:
        asyncio.run(go())
    finally:
        DBOS.destroy()


def _find_sent(to: str, text: str, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
    """The seed's reconcile function: did a delivery with this call's key go out?"""
    for d in _deliveries(Path(os.environ["BENCH_LEDGER"])):
        if d["key"] == ctx.idempotency_key:
            return stead.Done({"delivered": True, "id": d["id"]})
    return stead.NotDone()


def _child_stead(workdir: Path, phase: str) -> None:
    ledger = workdir / "deliveries.jsonl"
    os.environ["BENCH_LEDGER"] = str(ledger)

    @sa.effect("non_idempotent", reconcile=_find_sent)
    @function_tool
    def send_message(to: str, text: str) -> dict[str, Any]:
        """Send a customer a message."""
        return {"delivered": True, "id": _deliver(ledger, sa.tool_context().idempotency_key)}

    agent = sa.durable(Agent(name="support", model=_model(1, "send_message"), tools=[send_message]))

    async def go() -> None:
        async with stead.Runtime(f"sqlite:///{workdir / 'stead.db'}", agents=[agent]) as rt:
            if phase == "start":
                await rt.run(await rt.start(agent, "Tell Ada", run_id="seed"))
            else:
                view = await rt.resume("seed")
                assert view.status.value == "completed", view.error

    asyncio.run(go())


def seed(side: str) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"oai-seed-{side}-"))
    try:

        def child(phase: str, kill: bool) -> int:
            env = {**os.environ, "BENCH_KILL": "1" if kill else "0"}
            cmd = [sys.executable, str(HERE), "--child", side, phase, str(workdir)]
            return subprocess.run(
                cmd, env=env, capture_output=True, timeout=300, check=False
            ).returncode

        first = child("start", kill=True)
        second = child("resume", kill=False)
        return {
            "side": side,
            "killed": first == -signal.SIGKILL,
            "resumed": second == 0,
            "deliveries": len(_deliveries(workdir / "deliveries.jsonl")),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- overhead per durable step ----------------------------------------------------------------


@sa.effect("read_only")
@function_tool
def noop(n: int) -> str:
    """Do nothing."""
    return "ok"


def _plain() -> Callable[[], Awaitable[None]]:
    async def one() -> None:
        agent = Agent(name="noop", model=_model(TURNS, "noop"), tools=[noop])
        result = await Runner.run(agent, "go", max_turns=TURNS + 1)
        assert result.final_output == "done"

    return one


async def _stead(workdir: Path, durability: str) -> tuple[Callable[[], Awaitable[None]], Any]:
    # A fresh scripted model per run: the same agent under its own name each time.
    count = {"n": 0}
    rt = stead.Runtime(f"sqlite:///{workdir / f'stead-{durability}.db'}")
    await rt.__aenter__()

    async def one() -> None:
        count["n"] += 1
        agent = sa.durable(
            Agent(name="noop", model=_model(TURNS, "noop"), tools=[noop]),
            name=f"noop{count['n']}",
            durability=durability,  # type: ignore[arg-type]
        )
        view = await rt.run(await rt.start(agent, "go"))
        assert view.status.value == "completed", view.error

    return one, rt


def _dbos(workdir: Path) -> Callable[[], Awaitable[None]]:
    from dbos import DBOS
    from dbos_openai_agents import DBOSRunner

    DBOS(config=_dbos_config("noop", workdir))

    @DBOS.step()
    async def noop_step(n: int) -> str:
        return "ok"

    @function_tool(name_override="noop")
    async def durable_noop(n: int) -> str:
        """Do nothing."""
        return await noop_step(n)

    @DBOS.workflow()
    async def run(prompt: str) -> str:
        agent = Agent(name="noop", model=_model(TURNS, "noop"), tools=[durable_noop])
        return str((await DBOSRunner.run(agent, prompt, max_turns=TURNS + 1)).final_output)

    DBOS.launch()

    async def one() -> None:
        assert await run("go") == "done"

    return one


async def overhead(runs: int, rounds: int) -> dict[str, float]:
    workdir = Path(tempfile.mkdtemp(prefix="oai-overhead-"))
    closers: list[Any] = []
    try:
        sides: dict[str, Callable[[], Awaitable[None]]] = {"plain": _plain()}
        try:
            sides["dbos"] = _dbos(workdir)
        except ImportError as exc:
            print(f"dbos skipped: {exc}", file=sys.stderr)
        for mode in ("strict", "effects"):
            one, rt = await _stead(workdir, mode)
            sides[f"stead {mode}"] = one
            closers.append(rt)
        for one in sides.values():  # warm-up: imports, first connections
            await one()
        times: dict[str, list[float]] = {k: [] for k in sides}
        for r in range(rounds):
            order = list(sides)[r % len(sides) :] + list(sides)[: r % len(sides)]
            for name in order:
                t0 = time.perf_counter()
                for _ in range(runs):
                    await sides[name]()
                times[name].append((time.perf_counter() - t0) / runs / STEPS)
        return {k: statistics.median(v) * 1e6 for k, v in times.items()}
    finally:
        for rt in closers:
            await rt.__aexit__(None, None, None)
        if "dbos" in sys.modules:
            from dbos import DBOS

            DBOS.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


def _dbos_installs() -> bool:
    try:
        import dbos_openai_agents  # noqa: F401
    except ImportError as exc:
        print(f"dbos skipped: {exc} (pip install -e '.[compare]')", file=sys.stderr)
        return False
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", nargs=3, metavar=("SIDE", "PHASE", "DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    set_tracing_disabled(True)
    if args.child:
        side, phase, workdir = args.child
        (_child_dbos if side == "dbos" else _child_stead)(Path(workdir), phase)
        return
    started = time.strftime("%Y-%m-%d", time.gmtime())
    seeds = ([seed("dbos")] if _dbos_installs() else []) + [seed("stead")]
    per_step = asyncio.run(overhead(runs=3 if args.quick else 20, rounds=2 if args.quick else 7))
    if args.json:
        print(json.dumps({"started": started, "seed": seeds, "us_per_step": per_step}, indent=2))
        return
    plain = per_step.get("plain", 0.0)
    print(f"Measured {started}, one run of bench/under_openai_agents.py ({os.cpu_count()} CPUs)\n")
    print(
        "| Agents SDK agent | seed scenario: deliveries after the kill and resume "
        "| µs per durable step | added to plain |"
    )
    print("| --- | --- | --- | --- |")
    print(f"| plain `Runner.run` (not durable) | — | {plain:,.0f} | — |")
    by_side = {s["side"]: s for s in seeds}
    for name in per_step:
        if name == "plain":
            continue
        s = by_side.get(name.split()[0])
        cell = "—"
        if s is not None and name != "stead effects":
            cell = f"{s['deliveries']}" + (
                "" if s["killed"] and s["resumed"] else " (did not run as planned)"
            )
        elif name == "stead effects":
            cell = "(strict's row)"
        print(f"| {name} | {cell} | {per_step[name]:,.0f} | {per_step[name] - plain:,.0f} |")


if __name__ == "__main__":
    main()
