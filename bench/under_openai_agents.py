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

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

import stead
import stead.openai_agents as sa
from _under import MESSAGE, Bench, dbos_config, deliver, deliveries, main

HERE = Path(__file__).resolve()
STEPS = 21
TURNS = 10


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


def _child_dbos(workdir: Path, phase: str) -> None:
    from dbos import DBOS, SetWorkflowID
    from dbos_openai_agents import DBOSRunner

    ledger = workdir / "deliveries.jsonl"
    DBOS(config=dbos_config("seed", workdir))

    @DBOS.step()
    async def deliver(to: str, text: str) -> int:
        return deliver(ledger, "dbos")

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
    for d in deliveries(Path(os.environ["BENCH_LEDGER"])):
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
        return {"delivered": True, "id": deliver(ledger, sa.tool_context().idempotency_key)}

    agent = sa.durable(Agent(name="support", model=_model(1, "send_message"), tools=[send_message]))

    async def go() -> None:
        async with stead.Runtime(f"sqlite:///{workdir / 'stead.db'}", agents=[agent]) as rt:
            if phase == "start":
                await rt.run(await rt.start(agent, "Tell Ada", run_id="seed"))
            else:
                view = await rt.resume("seed")
                assert view.status.value == "completed", view.error

    asyncio.run(go())


# -- overhead per durable step ----------------------------------------------------------------


@sa.effect("read_only")
@function_tool
def noop(n: int) -> str:
    """Do nothing."""
    return "ok"


async def _plain(workdir: Path) -> Callable[[], Awaitable[None]]:
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

    DBOS(config=dbos_config("noop", workdir))

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


def _dbos_installs() -> bool:
    try:
        import dbos_openai_agents  # noqa: F401
    except ImportError as exc:
        print(f"dbos skipped: {exc} (pip install -e '.[compare]')", file=sys.stderr)
        return False
    return True


BENCH = Bench(
    script=HERE,
    doc=__doc__ or "",
    children={"dbos": _child_dbos, "stead": _child_stead},
    seeds=lambda: (["dbos"] if _dbos_installs() else []) + ["stead"],
    plain=_plain,
    dbos=_dbos,
    stead=_stead,
    prefix="oai",
    agent="Agents SDK agent",
    plain_row="plain `Runner.run` (not durable)",
    date_format="%Y-%m-%d",
    steps=STEPS,
)


if __name__ == "__main__":
    set_tracing_disabled(True)
    main(BENCH)
