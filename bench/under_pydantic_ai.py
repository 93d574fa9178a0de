"""A Pydantic AI agent made durable by Pydantic AI's DBOS engine and by stead, side by side.

    .venv/bin/python bench/under_pydantic_ai.py            # both parts, a markdown table
    .venv/bin/python bench/under_pydantic_ai.py --quick    # fewer runs: does it work at all
    .venv/bin/python bench/under_pydantic_ai.py --json     # machine-readable

Needs the ``compare`` extra (DBOS and Pydantic AI): ``pip install -e '.[compare]'``.

**The seed scenario.** One Pydantic AI agent (a deterministic ``FunctionModel``: turn 0 asks
for ``send_message``, turn 1 answers), one tool that delivers a message (a line appended,
fsynced, to a file: the outside world). The process is SIGKILLed inside the tool right after
the delivery, before the engine records the call's result; a new process resumes the run.
Counted: deliveries once the run is finished.

* **dbos**: ``DBOSDurability`` on a SQLite system database, the agent run inside a
  ``@DBOS.workflow``; the delivery is a ``@DBOS.step`` (DBOS does not wrap plain function tools:
  its docs have the user make them steps). The second process ``DBOS.launch()``es, which
  recovers the pending workflow, and awaits it.
* **stead**: ``SteadDurability`` with ``metadata={"stead": {"effect": "non_idempotent",
  "reconcile": find_sent}}`` on SQLite; the second process runs ``rt.resume``.

**Overhead per durable step.** The same agent with a tool that does nothing, 10 tool turns a
run (10 model requests that each ask for one call, the 10 calls, 1 final request: 21 steps),
runs back to back in one process: plain Pydantic AI (not durable), with DBOS (a workflow per
run; model requests are DBOS steps, the tool a ``@DBOS.step``), with stead (``strict`` and
``effects`` durability). The figure is the median over rounds of (batch time / runs / 21);
"added" is that minus plain's.
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
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import stead

HERE = Path(__file__).resolve()
STEPS = 21
TURNS = 10
MESSAGE = {"to": "ada@example.com", "text": "Your refund is on its way."}


# -- the agent's model, the same for every engine ------------------------------------------------


def _model(turns: int, tool: str) -> Any:
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    def answered(messages: list[ModelMessage]) -> int:
        return sum(1 for m in messages if m.kind == "response")

    def args(n: int) -> dict[str, Any]:
        return MESSAGE if tool == "send_message" else {"n": n}

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = answered(messages)
        if n < turns:
            return ModelResponse(parts=[ToolCallPart(tool, args(n), tool_call_id=f"call_{n}")])
        return ModelResponse(parts=[TextPart("done")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        n = answered(messages)
        if n < turns:
            yield {
                0: DeltaToolCall(name=tool, json_args=json.dumps(args(n)), tool_call_id=f"call_{n}")
            }
        else:
            yield "done"

    return FunctionModel(reply, stream_function=stream, model_name="scripted")


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
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    ledger = workdir / "deliveries.jsonl"
    DBOS(config=_dbos_config("seed", workdir))
    agent = Agent(_model(1, "send_message"), name="support", capabilities=[DBOSDurability()])

    @DBOS.step()
    async def deliver(to: str, text: str) -> int:
        return _deliver(ledger, "dbos")

    @agent.tool_plain
    async def send_message(to: str, text: str) -> dict[str, Any]:
        return {"delivered": True, "id": await deliver(to, text)}

    @DBOS.workflow()
    async def support(prompt: str) -> str:
        return (await agent.run(prompt)).output

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
    from pydantic_ai import Agent

    from stead.pydantic_ai import SteadDurability, tool_context

    ledger = workdir / "deliveries.jsonl"
    os.environ["BENCH_LEDGER"] = str(ledger)
    find_sent = _find_sent

    agent = Agent(_model(1, "send_message"), name="support", capabilities=[SteadDurability()])

    @agent.tool_plain(metadata={"stead": {"effect": "non_idempotent", "reconcile": find_sent}})
    def send_message(to: str, text: str) -> dict[str, Any]:
        return {"delivered": True, "id": _deliver(ledger, tool_context().idempotency_key)}

    async def go() -> None:
        async with stead.Runtime(f"sqlite:///{workdir / 'stead.db'}", agents=[agent]) as rt:
            if phase == "start":
                await rt.run(await rt.start(agent, "Tell Ada", run_id="seed"))
            else:
                view = await rt.resume("seed")
                assert view.status.value == "completed", view.error

    asyncio.run(go())


def seed(side: str) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"seed-{side}-"))
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


async def _plain(workdir: Path) -> Callable[[], Awaitable[None]]:
    from pydantic_ai import Agent

    agent = Agent(_model(TURNS, "noop"), name="noop")

    @agent.tool_plain
    async def noop(n: int) -> str:
        return "ok"

    async def one() -> None:
        await agent.run("go")

    return one


async def _stead(workdir: Path, durability: str) -> tuple[Callable[[], Awaitable[None]], Any]:
    from pydantic_ai import Agent

    from stead.pydantic_ai import SteadDurability

    agent = Agent(
        _model(TURNS, "noop"),
        name="noop",
        capabilities=[SteadDurability(durability=durability)],  # type: ignore[arg-type]
    )

    @agent.tool_plain(metadata={"stead": {"effect": "read_only"}})
    async def noop(n: int) -> str:
        return "ok"

    rt = stead.Runtime(f"sqlite:///{workdir / f'stead-{durability}.db'}", agents=[agent])
    await rt.__aenter__()

    async def one() -> None:
        view = await rt.run(await rt.start(agent, "go"))
        assert view.status.value == "completed", view.error

    return one, rt


def _dbos(workdir: Path) -> Callable[[], Awaitable[None]]:
    from dbos import DBOS
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    DBOS(config=_dbos_config("noop", workdir))
    agent = Agent(_model(TURNS, "noop"), name="noop", capabilities=[DBOSDurability()])

    @DBOS.step()
    async def noop_step(n: int) -> str:
        return "ok"

    @agent.tool_plain
    async def noop(n: int) -> str:
        return await noop_step(n)

    @DBOS.workflow()
    async def run(prompt: str) -> str:
        return (await agent.run(prompt)).output

    DBOS.launch()

    async def one() -> None:
        await run("go")

    return one


async def overhead(runs: int, rounds: int) -> dict[str, float]:
    workdir = Path(tempfile.mkdtemp(prefix="pai-overhead-"))
    closers: list[Any] = []
    try:
        sides: dict[str, Callable[[], Awaitable[None]]] = {"plain": await _plain(workdir)}
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", nargs=3, metavar=("SIDE", "PHASE", "DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        side, phase, workdir = args.child
        (_child_dbos if side == "dbos" else _child_stead)(Path(workdir), phase)
        return
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    seeds = [seed("dbos"), seed("stead")]
    per_step = asyncio.run(overhead(runs=3 if args.quick else 20, rounds=2 if args.quick else 7))
    if args.json:
        print(json.dumps({"started": started, "seed": seeds, "us_per_step": per_step}, indent=2))
        return
    plain = per_step.get("plain", 0.0)
    print(f"Measured {started}, one run of bench/under_pydantic_ai.py ({os.cpu_count()} CPUs)\n")
    print(
        "| Pydantic AI agent | seed scenario: deliveries after the kill and resume "
        "| µs per durable step | added to plain |"
    )
    print("| --- | --- | --- | --- |")
    print(f"| plain (not durable) | — | {plain:,.0f} | — |")
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
