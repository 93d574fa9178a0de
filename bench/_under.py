"""What ``under_pydantic_ai.py`` and ``under_openai_agents.py`` share: the seed scenario's
outside world (a ledger of deliveries, the kill right after the first), its two child
processes per side, the timing of the overhead sides, and the printed table.

Each script keeps what is its framework's own: the agent, its DBOS and stead children, and
the sides of the overhead part."""

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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Side = Callable[[], Awaitable[None]]
"""One run of an overhead side's agent."""

MESSAGE = {"to": "ada@example.com", "text": "Your refund is on its way."}


def deliveries(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(x) for x in ledger.read_text().splitlines() if x]


def deliver(ledger: Path, key: str) -> int:
    """Deliver a message (a line appended and fsynced); the first one, in a process told to
    (``BENCH_KILL=1``), is followed by a SIGKILL before the engine can record it."""
    n = len(deliveries(ledger)) + 1
    with ledger.open("a") as f:
        f.write(json.dumps({"id": n, "key": key}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if os.environ.get("BENCH_KILL") == "1" and n == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # delivered; the engine has not recorded it
    return n


def dbos_config(name: str, workdir: Path) -> Any:
    url = f"sqlite:///{workdir / 'dbos.db'}"
    return {"name": name, "system_database_url": url, "log_level": "WARNING"}


@dataclass(frozen=True, slots=True)
class Bench:
    """One framework's bench, as its script defines it."""

    script: Path
    doc: str
    children: dict[str, Callable[[Path, str], None]]
    """The seed scenario's child of each side (``dbos``, ``stead``), by side."""
    seeds: Callable[[], Sequence[str]]
    """The sides whose seed scenario runs (those that install)."""
    plain: Callable[[Path], Awaitable[Side]]
    dbos: Callable[[Path], Side]
    stead: Callable[[Path, str], Awaitable[tuple[Side, Any]]]
    prefix: str
    """The scratch directories' prefix."""
    agent: str
    """The table's first heading."""
    plain_row: str
    date_format: str
    steps: int


def main(bench: Bench) -> None:
    """The bench's command line: a seed child (``--child``), or both parts and the table."""
    p = argparse.ArgumentParser(description=bench.doc.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", nargs=3, metavar=("SIDE", "PHASE", "DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        side, phase, workdir = args.child
        bench.children[side](Path(workdir), phase)
        return
    started = time.strftime(bench.date_format, time.gmtime())
    seeds = [seed(bench.script, side, f"{bench.prefix}-seed") for side in bench.seeds()]
    per_step = asyncio.run(
        overhead(
            f"{bench.prefix}-overhead",
            bench.plain,
            bench.dbos,
            bench.stead,
            runs=3 if args.quick else 20,
            rounds=2 if args.quick else 7,
            steps=bench.steps,
        )
    )
    report(args, bench, started, seeds, per_step)


def seed(script: Path, side: str, prefix: str) -> dict[str, Any]:
    """The seed scenario on ``side``: ``script --child SIDE start DIR`` killed after the
    delivery, then ``script --child SIDE resume DIR``; the deliveries counted."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{prefix}-{side}-"))
    try:

        def child(phase: str, kill: bool) -> int:
            env = {**os.environ, "BENCH_KILL": "1" if kill else "0"}
            cmd = [sys.executable, str(script), "--child", side, phase, str(workdir)]
            return subprocess.run(
                cmd, env=env, capture_output=True, timeout=300, check=False
            ).returncode

        first = child("start", kill=True)
        second = child("resume", kill=False)
        return {
            "side": side,
            "killed": first == -signal.SIGKILL,
            "resumed": second == 0,
            "deliveries": len(deliveries(workdir / "deliveries.jsonl")),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def overhead(
    prefix: str,
    plain: Callable[[Path], Awaitable[Side]],
    dbos: Callable[[Path], Side],
    stead: Callable[[Path, str], Awaitable[tuple[Side, Any]]],
    *,
    runs: int,
    rounds: int,
    steps: int,
) -> dict[str, float]:
    """µs per durable step of each side: the median over ``rounds`` of (batch of ``runs``
    runs / runs / ``steps``), the sides taken in a rotating order each round."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    closers: list[Any] = []
    try:
        sides: dict[str, Side] = {"plain": await plain(workdir)}
        try:
            sides["dbos"] = dbos(workdir)
        except ImportError as exc:
            print(f"dbos skipped: {exc}", file=sys.stderr)
        for mode in ("strict", "effects"):
            one, rt = await stead(workdir, mode)
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
                times[name].append((time.perf_counter() - t0) / runs / steps)
        return {k: statistics.median(v) * 1e6 for k, v in times.items()}
    finally:
        for rt in closers:
            await rt.__aexit__(None, None, None)
        if "dbos" in sys.modules:
            from dbos import DBOS

            DBOS.destroy()
        shutil.rmtree(workdir, ignore_errors=True)


def report(
    args: argparse.Namespace,
    bench: Bench,
    started: str,
    seeds: Sequence[dict[str, Any]],
    per_step: dict[str, float],
) -> None:
    """The results: JSON (``--json``) or the markdown table of the bench's README row."""
    if args.json:
        print(json.dumps({"started": started, "seed": seeds, "us_per_step": per_step}, indent=2))
        return
    plain = per_step.get("plain", 0.0)
    print(f"Measured {started}, one run of bench/{bench.script.name} ({os.cpu_count()} CPUs)\n")
    print(
        f"| {bench.agent} | seed scenario: deliveries after the kill and resume "
        "| µs per durable step | added to plain |"
    )
    print("| --- | --- | --- | --- |")
    print(f"| {bench.plain_row} | — | {plain:,.0f} | — |")
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
