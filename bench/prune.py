"""Pruning: how many runs a second retention deletes, and what pruning in the background
costs the runs in flight beside it.

    .venv/bin/python bench/prune.py              # SQLite, 3,000 old runs, 3 rounds each way
    .venv/bin/python bench/prune.py --postgres   # the same on a throwaway PostgreSQL
    .venv/bin/python bench/prune.py --quick      # 200 old runs, 1 round: does it work
    .venv/bin/python bench/prune.py --json       # the same figures, machine-readable

**Setup.** A fresh store holding ``--old`` finished runs, each 3 tool turns and a final turn
(9 events, one snapshot at most), written under a clock two days back, so that a policy
keeping completed runs a day lets every one of them go.

**In flight, pruning or not.** In one process, ``--runs`` new runs are driven 100 at a time
(``Runtime.run`` in as many tasks; a ``ScriptedModel`` without delay and an async
``read_only`` tool: 7 durable steps a run, every one a commit). The rounds alternate: once
alone, once with a ``Worker``'s ``Pruner`` deleting old runs beside them with its defaults
(batches of 20 runs, 0.1 s apart). Steps a second are counted over the round;
the median of the rounds of each kind is shown, the runs the pruner deleted while they ran,
and its longest batch (what a run in flight may wait for it).

**Throughput.** First, ``Runtime.prune(apply=True)`` deletes ``--old`` old runs, 50 a
transaction, on an otherwise idle store: runs a second, wall clock. The old runs are then
written again for the rounds above.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import stead
from stead.core.retention import DAY, Retention
from stead.runtime import Pruner
from stead.testing import Reply, ScriptedModel, temporary_postgres

TURNS = 3
STEPS = 2 * TURNS + 1
IN_FLIGHT = 100


@stead.tool(effect="read_only")
async def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped"}


def agent() -> stead.Agent:
    script = [Reply(tool_calls=[("lookup", {"order_id": i})]) for i in range(TURNS)]
    return stead.Agent("bench", ScriptedModel([*script, Reply(text="done")]), [lookup])


async def drive(rt: stead.Runtime, a: stead.Agent, n: int) -> None:
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one() -> None:
        async with gate:
            await rt.run(await rt.start(a, "check"))

    await asyncio.gather(*(one() for _ in range(n)))


async def old_runs(url: str, a: stead.Agent, n: int) -> None:
    then = time.time() - 2 * DAY
    async with stead.Runtime(url, agents=[a], clock=lambda: then) as rt:
        await drive(rt, a, n)


async def bench(url: str, old: int, runs: int, rounds: int) -> dict[str, Any]:
    a = agent()
    policy = Retention(keep={"completed": DAY})  # a worker's defaults: 20 a batch, 0.1 s apart
    await old_runs(url, a, old)
    async with stead.Runtime(url, agents=[a]) as rt:
        start = time.perf_counter()
        done = await rt.prune(policy, apply=True, batch=50)
        took = time.perf_counter() - start
    await old_runs(url, a, old)
    alone: list[float] = []
    pruning: list[float] = []
    pruned_meanwhile = 0
    longest = 0.0
    async with stead.Runtime(url, agents=[a]) as rt:
        await drive(rt, a, min(runs, 100))  # warm up
        for _ in range(rounds):
            start = time.perf_counter()
            await drive(rt, a, runs)
            alone.append(runs * STEPS / (time.perf_counter() - start))

            pruner = Pruner(rt.store, policy, time.time)
            stop = asyncio.Event()
            task = asyncio.ensure_future(pruner.run(stop))
            start = time.perf_counter()
            await drive(rt, a, runs)
            pruning.append(runs * STEPS / (time.perf_counter() - start))
            stop.set()
            await task
            pruned_meanwhile += pruner.pruned
            longest = max(longest, pruner.longest)
    return {
        "old_runs": old,
        "runs_per_round": runs,
        "rounds": rounds,
        "steps_per_s_alone": statistics.median(alone),
        "steps_per_s_pruning": statistics.median(pruning),
        "pruned_while_in_flight": pruned_meanwhile,
        "longest_batch_ms": longest * 1000,
        "prune_runs": len(done.runs),
        "prune_runs_per_s": len(done.runs) / took if took else 0.0,
        "prune_kib": done.bytes / 1024,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL")
    p.add_argument("--old", type=int, default=3000, help="old finished runs to prune")
    p.add_argument("--runs", type=int, default=300, help="runs driven per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="200 old runs, 1 round")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.old, args.runs, args.rounds = 200, 100, 1
    with tempfile.TemporaryDirectory() as tmp:
        if args.postgres:
            with temporary_postgres() as url:
                figures = asyncio.run(bench(url, args.old, args.runs, args.rounds))
        else:
            url = f"sqlite:///{Path(tmp) / 'prune.db'}"
            figures = asyncio.run(bench(url, args.old, args.runs, args.rounds))
    figures["store"] = "postgresql" if args.postgres else "sqlite"
    figures["machine"] = (
        f"{platform.machine()} {platform.system()}, python {sys.version.split()[0]}"
    )
    if args.json:
        print(json.dumps(figures))
        return
    f = figures
    print(
        f"store {f['store']}: {f['old_runs']} old runs; {f['rounds']} rounds of "
        f"{f['runs_per_round']} runs, {IN_FLIGHT} in flight"
    )
    print(f"  in flight, alone      {f['steps_per_s_alone']:>9,.0f} steps/s")
    print(
        f"  in flight, pruning    {f['steps_per_s_pruning']:>9,.0f} steps/s "
        f"({f['steps_per_s_pruning'] / f['steps_per_s_alone']:.2f}x; "
        f"{f['pruned_while_in_flight']} runs pruned meanwhile, longest batch "
        f"{f['longest_batch_ms']:.1f} ms)"
    )
    print(
        f"  prune, idle store     {f['prune_runs_per_s']:>9,.0f} runs/s "
        f"({f['prune_runs']} runs, {f['prune_kib']:,.0f} KiB of events)"
    )


if __name__ == "__main__":
    main()
