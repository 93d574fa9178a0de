"""An OpenAI Agents SDK agent plain and under stead: the time per durable step.

    .venv/bin/python bench/under_openai_agents.py            # a markdown table
    .venv/bin/python bench/under_openai_agents.py --quick    # fewer runs: does it work at all

Needs the openai-agents extra (``make test`` installs it with ``dev``).

The same agent (the SDK's deterministic ``agents.testing.ScriptedModel``: 10 turns that each
ask for one call of a tool that does nothing, then a final answer: 21 steps a run), runs back
to back in one process: plain ``Runner.run`` (not durable), and through
``stead.openai_agents.durable`` on SQLite in the ``strict`` and ``effects`` durability
modes. The figure is the median over rounds of (batch time / runs / 21); "added" is that
minus plain's. The seed scenario's deliveries are the tests' (``tests/oai/test_oai_seed.py``);
the same scenario under DBOS's OpenAI Agents integration is not measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

import stead
import stead.openai_agents as sa

STEPS = 21
TURNS = 10


@sa.effect("read_only")
@function_tool
def noop(n: int) -> str:
    """Do nothing."""
    return "ok"


def _model() -> ScriptedModel:
    steps: list[Any] = [
        [function_call("noop", {"n": i}, call_id=f"call_{i}")] for i in range(TURNS)
    ]
    return ScriptedModel([*steps, [assistant_message("done")]])


def _agent() -> Agent[Any]:
    return Agent(name="bench", model=_model(), tools=[noop])


async def _plain(runs: int) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        result = await Runner.run(_agent(), "go", max_turns=TURNS + 1)
        assert result.final_output == "done"
    return time.perf_counter() - start


async def _stead(runs: int, mode: str, workdir: Path) -> float:
    db = workdir / f"{mode}-{time.monotonic_ns()}.db"
    agents = [sa.durable(_agent(), name=f"bench{i}", durability=mode) for i in range(runs)]  # type: ignore[arg-type]
    async with stead.Runtime(f"sqlite:///{db}", agents=agents) as rt:
        start = time.perf_counter()
        for agent in agents:
            view = await rt.run(await rt.start(agent, "go"))
            assert view.output == "done", view.error
        return time.perf_counter() - start


async def main(rounds: int, runs: int) -> None:
    set_tracing_disabled(True)
    per: dict[str, list[float]] = {"plain": [], "strict": [], "effects": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            per["plain"].append(await _plain(runs) / runs / STEPS)
            for mode in ("strict", "effects"):
                per[mode].append(await _stead(runs, mode, Path(tmp)) / runs / STEPS)
    plain = statistics.median(per["plain"])
    print("| Agents SDK agent | µs per durable step | added to plain |")
    print("| --- | --- | --- |")
    print(f"| plain (not durable) | {plain * 1e6:,.0f} | — |")
    for mode in ("strict", "effects"):
        m = statistics.median(per[mode])
        print(f"| stead `{mode}` (SQLite) | {m * 1e6:,.0f} | {(m - plain) * 1e6:,.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    asyncio.run(main(rounds=1 if args.quick else 5, runs=3 if args.quick else 20))
