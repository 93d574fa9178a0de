"""Child process for the structured-output and deps crash tests.

python output_child.py STORE start|run output|deps NAME

``output``: an agent whose model first gives an invalid final result, then a valid one.
``deps``: an agent whose tool reports which process's deps it was given (``NAME``).
Prints the run's view as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass

from pydantic import BaseModel

import stead
from stead.testing import Reply, ScriptedModel

RUN_ID = "run_output_crash"


class Address(BaseModel):
    """Where a customer lives."""

    city: str
    zip_code: str


@dataclass(frozen=True)
class Deps:
    """What a worker process hands its tools."""

    name: str
    pid: int


@stead.tool(effect="read_only")
def whoami(ctx: stead.ToolContext[Deps]) -> str:
    """Say which worker's deps this call got."""
    return f"{ctx.deps.name} (pid {ctx.deps.pid})"


def output_agent() -> stead.Agent:
    model = ScriptedModel(
        [
            Reply(tool_calls=[("final_result", {"city": "Paris"})]),  # zip_code missing
            Reply(tool_calls=[("final_result", {"city": "Paris", "zip_code": "75001"})]),
        ]
    )
    return stead.Agent("address", model, output_type=Address)


def deps_agent() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("whoami", {})]), lambda r: r.messages[-1].content])
    return stead.Agent("deps", model, [whoami], deps_type=Deps)


async def main(store: str, mode: str, kind: str, name: str) -> None:
    agent = output_agent() if kind == "output" else deps_agent()
    deps = Deps(name=name, pid=os.getpid())
    async with stead.Runtime(store, agents=[agent], deps=deps) as rt:
        if mode == "start":
            await rt.start(agent, "Where does Ada live?", run_id=RUN_ID)
        view = await rt.run(RUN_ID)
        print(
            json.dumps(
                {
                    "status": view.status.value,
                    "output": view.output,
                    "data": view.data_json,
                    "typed": type(view.data).__name__,
                    "error": view.error,
                }
            )
        )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
