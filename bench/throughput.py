"""How many runs a fleet of ``stead worker`` processes gets through, and what a held run costs.

    .venv/bin/python bench/throughput.py            # 1, 2, 4 workers on PostgreSQL and SQLite
    .venv/bin/python bench/throughput.py --quick    # 1 and 2 workers, fewer runs: does it work
    .venv/bin/python bench/throughput.py --json     # the same figures, machine-readable

(``make throughput`` runs the first line.)

**Throughput.** For each backend and each fleet size W: a fresh store, W ``stead worker``
processes with ``--concurrency 100``, then ``2 x 100 x W`` runs enqueued by this process as
fast as it can; the clock runs from the first enqueue until every run is completed. Each run
is 3 tool turns (one ``read_only`` async tool call each, no latency of its own) and a final
turn: 4 model calls and 3 tool calls, so 7 *durable steps* (one effect each, its outcome
committed before the next step). The model is a ``ScriptedModel`` that takes 50 ms a call.

The *ideal* figure is latency-bound: with 100 runs in flight per worker and 4 x 50 ms of
model time per run, W workers cannot finish more than ``W x 100 / 0.2 s`` runs a second, or
7 times that in steps, however fast the store. The measured figure is what the store, the
run loop and the machine (its cores: every worker and the database share them) allow.

**Memory.** One worker with ``--concurrency 1000``; 1,000 runs whose model call takes an
hour. Once all 1,000 are claimed and waiting in their model call, the worker's resident set
(``VmRSS``) is read and compared with the same worker idle before the runs arrived.

PostgreSQL is a throwaway server from the machine's own binaries (``temporary_postgres``),
with fsync on: as durable as SQLite's ``synchronous=FULL``. ``STEAD_BENCH_POSTGRES_URL``
uses an existing server instead (each measurement gets a schema of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import stead
from stead.store import open_store
from stead.testing import Reply, ScriptedModel, temporary_postgres

HERE = Path(__file__).parent
STEAD = shutil.which("stead", path=str(Path(sys.executable).parent)) or "stead"
MODEL_LATENCY = 0.05
TOOL_TURNS = 3
MODEL_CALLS = TOOL_TURNS + 1
STEPS_PER_RUN = TOOL_TURNS + MODEL_CALLS
PER_WORKER = 100
HELD = 1000


# -- the agents the worker processes serve (``--agents throughput:agents``) ----------------


@stead.tool(effect="read_only")
async def lookup(order_id: int) -> dict[str, Any]:
    """Look up an order."""
    return {"order_id": order_id, "status": "shipped"}


def agents() -> list[stead.Agent]:
    """``bench``: 3 tool turns and an answer, 50 ms a model call. ``held``: one model call
    that takes an hour (the memory measurement)."""
    turns: list[Reply | str] = [
        Reply(tool_calls=[("lookup", {"order_id": 1000 + i})]) for i in range(TOOL_TURNS)
    ]
    turns.append("All shipped.")
    bench = stead.Agent("bench", ScriptedModel(turns, delay=MODEL_LATENCY), [lookup])
    held = stead.Agent("held", ScriptedModel(["Done."], delay=3600.0))
    return [bench, held]


# -- processes and stores -------------------------------------------------------------------


class Fleet:
    """W ``stead worker`` processes; logs in a temporary directory."""

    def __init__(self, url: str, n: int, concurrency: int, logs: Path) -> None:
        self.logs = [logs / f"worker-{uuid.uuid4().hex[:6]}-{i}.log" for i in range(n)]
        self.procs = [
            subprocess.Popen(
                [
                    STEAD, "--store", url, "worker", "--agents", "throughput:agents",
                    "--concurrency", str(concurrency), "--poll", "0.05", "--lease-ttl", "60",
                    "--grace", "0",
                ],
                cwd=HERE,
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
            )
            for log in self.logs
        ]  # fmt: skip

    def ready(self) -> bool:
        for p, log in zip(self.procs, self.logs, strict=True):
            if p.poll() is not None:
                raise SystemExit(f"a worker died:\n{log.read_text()[-3000:]}")
        return all(" ready: " in log.read_text() for log in self.logs)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def rss_kib(pid: int) -> int:
    """Resident set size of a process, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit("no VmRSS in /proc (Linux only)")


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    url = os.environ.get("STEAD_BENCH_POSTGRES_URL")
    if url:
        yield url
        return
    with temporary_postgres(durable=True, max_connections=300) as url:
        yield url


def fresh_url(backend: str, pg: str | None, tmp: Path) -> str:
    """A store location nobody used yet."""
    if backend == "sqlite":
        return f"sqlite:///{tmp / f'bench-{uuid.uuid4().hex[:8]}.db'}"
    import psycopg

    assert pg is not None
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    sep = "&" if "?" in pg else "?"
    return f"{pg}{sep}options=-csearch_path%3D{schema}"


async def until_ready(fleet: Fleet) -> None:
    for _ in range(1200):
        if fleet.ready():
            return
        await asyncio.sleep(0.05)
    raise SystemExit("the workers did not start within a minute")


class Counter:
    """Counts runs by status on a connection of its own, beside the store: one cheap query,
    so watching the fleet costs it nothing worth measuring."""

    def __init__(self, url: str) -> None:
        self.sqlite = url.startswith("sqlite:///")
        self.conn: Any
        if self.sqlite:
            import sqlite3

            self.conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True)

    def __call__(self, status: str) -> int:
        query = f"SELECT count(*) FROM runs WHERE status = '{status}'"
        row = self.conn.execute(query if self.sqlite else query.encode()).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.conn.close()


# -- measurements ---------------------------------------------------------------------------


async def throughput(url: str, workers: int, runs: int, tmp: Path) -> dict[str, Any]:
    """Seconds for ``runs`` runs through ``workers`` worker processes."""
    fleet = Fleet(url, workers, PER_WORKER, tmp)
    store = open_store(url)
    await store.list_runs(limit=1)
    count = Counter(url)
    try:
        await until_ready(fleet)
        await store.list_runs(limit=1)
        bench = agents()[0]
        start = time.perf_counter()
        async with stead.Runtime(store, agents=[bench]) as rt:
            for i in range(runs):
                await rt.start(bench, f"check order batch {i}")
            while (done := count("completed")) < runs:
                if time.perf_counter() - start > 600:
                    raise SystemExit(f"only {done} of {runs} runs completed in 10 minutes")
                await asyncio.sleep(0.1)
            elapsed = time.perf_counter() - start
    finally:
        fleet.stop()
        count.close()
        await store.close()
    ideal_runs = workers * PER_WORKER / (MODEL_CALLS * MODEL_LATENCY)
    return {
        "workers": workers,
        "runs": runs,
        "seconds": elapsed,
        "runs_per_s": runs / elapsed,
        "ideal_runs_per_s": ideal_runs,
        "steps_per_s": runs * STEPS_PER_RUN / elapsed,
        "ideal_steps_per_s": ideal_runs * STEPS_PER_RUN,
    }


async def memory(url: str, held: int, tmp: Path) -> dict[str, Any]:
    """A worker's RSS idle, and holding ``held`` runs that wait on the model."""
    fleet = Fleet(url, 1, held, tmp)
    store = open_store(url)
    await store.list_runs(limit=1)
    count = Counter(url)
    try:
        await until_ready(fleet)
        await asyncio.sleep(1.0)
        pid = fleet.procs[0].pid
        idle = rss_kib(pid)
        async with stead.Runtime(store, agents=agents()) as rt:
            for i in range(held):
                await rt.start("held", f"wait {i}")
            start = time.perf_counter()
            while (waiting := count("running")) < held:
                if time.perf_counter() - start > 300:
                    raise SystemExit(f"only {waiting} of {held} runs were claimed")
                await asyncio.sleep(0.2)
            await asyncio.sleep(2.0)  # let the last claims settle into their model calls
            holding = rss_kib(pid)
    finally:
        fleet.stop()
        count.close()
        await store.close()
    return {
        "runs": held,
        "idle_mib": idle / 1024,
        "holding_mib": holding / 1024,
        "per_run_kib": (holding - idle) / held,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'backend':<10} {'workers':>7} {'runs':>5} {'seconds':>8} "
        f"{'runs/s':>8} {'ideal':>7} {'steps/s':>9} {'ideal':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['backend']:<10} {r['workers']:>7} {r['runs']:>5} {r['seconds']:>8.2f} "
            f"{r['runs_per_s']:>8.1f} {r['ideal_runs_per_s']:>7.0f} "
            f"{r['steps_per_s']:>9.0f} {r['ideal_steps_per_s']:>7.0f}"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    fleets = (1, 2) if args.quick else (1, 2, 4)
    waves = 1 if args.quick else 2
    held = 200 if args.quick else HELD
    out: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "model_latency_s": MODEL_LATENCY,
        "steps_per_run": STEPS_PER_RUN,
        "concurrency_per_worker": PER_WORKER,
        "throughput": [],
        "memory": [],
    }
    with tempfile.TemporaryDirectory(prefix="stead-bench-") as d, postgres() as pg:
        tmp = Path(d)
        for backend in ("postgres", "sqlite"):
            for w in fleets:
                url = fresh_url(backend, pg, tmp)
                r = await throughput(url, w, waves * PER_WORKER * w, tmp)
                r["backend"] = backend
                out["throughput"].append(r)
                if not args.json:
                    print(
                        f"{backend:<8} {w} worker(s): {r['runs_per_s']:.1f} runs/s "
                        f"(ideal {r['ideal_runs_per_s']:.0f}), {r['steps_per_s']:.0f} steps/s",
                        flush=True,
                    )
            m = await memory(fresh_url(backend, pg, tmp), held, tmp)
            m["backend"] = backend
            out["memory"].append(m)
            if not args.json:
                print(
                    f"{backend:<8} memory: idle {m['idle_mib']:.1f} MiB, holding {held} runs "
                    f"{m['holding_mib']:.1f} MiB ({m['per_run_kib']:.1f} KiB a run)",
                    flush=True,
                )
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 and 2 workers, fewer runs")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    result = asyncio.run(main(args))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        m = result["machine"]
        print(
            f"\n{m['cpus']} CPUs, Python {m['python']}; model {MODEL_LATENCY * 1000:.0f} ms a "
            f"call; {STEPS_PER_RUN} durable steps a run; {PER_WORKER} runs in flight a worker\n"
        )
        print(table(result["throughput"]))
        print()
        for mem in result["memory"]:
            print(
                f"{mem['backend']:<10} worker RSS idle {mem['idle_mib']:.1f} MiB; holding "
                f"{mem['runs']} runs waiting on the model {mem['holding_mib']:.1f} MiB "
                f"(+{mem['per_run_kib']:.1f} KiB a run)"
            )
