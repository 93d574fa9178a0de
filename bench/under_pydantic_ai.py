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

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import stead
from _under import MESSAGE, Bench, dbos_config, deliver, deliveries, main

HERE = Path(__file__).resolve()
STEPS = 21
TURNS = 10


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


def _child_dbos(workdir: Path, phase: str) -> None:
    from dbos import DBOS, SetWorkflowID
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    ledger = workdir / "deliveries.jsonl"
    DBOS(config=dbos_config("seed", workdir))
    agent = Agent(_model(1, "send_message"), name="support", capabilities=[DBOSDurability()])

    @DBOS.step()
    async def deliver(to: str, text: str) -> int:
        return deliver(ledger, "dbos")

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
    for d in deliveries(Path(os.environ["BENCH_LEDGER"])):
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
        return {"delivered": True, "id": deliver(ledger, tool_context().idempotency_key)}

    async def go() -> None:
        async with stead.Runtime(f"sqlite:///{workdir / 'stead.db'}", agents=[agent]) as rt:
            if phase == "start":
                await rt.run(await rt.start(agent, "Tell Ada", run_id="seed"))
            else:
                view = await rt.resume("seed")
                assert view.status.value == "completed", view.error

    asyncio.run(go())


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

    DBOS(config=dbos_config("noop", workdir))
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


BENCH = Bench(
    script=HERE,
    doc=__doc__ or "",
    children={"dbos": _child_dbos, "stead": _child_stead},
    seeds=lambda: ["dbos", "stead"],
    plain=_plain,
    dbos=_dbos,
    stead=_stead,
    prefix="pai",
    agent="Pydantic AI agent",
    plain_row="plain (not durable)",
    date_format="%Y-%m-%d %H:%M UTC",
    steps=STEPS,
)


if __name__ == "__main__":
    main(BENCH)
