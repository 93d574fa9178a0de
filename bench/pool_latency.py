"""What does an executor pool add per tool and model call? In process against the ledger.

    .venv/bin/python bench/pool_latency.py            # 300 calls per side and store
    .venv/bin/python bench/pool_latency.py --quick    # 30: does it work at all
    .venv/bin/python bench/pool_latency.py --json

One call is one ``Executor.run`` of a tool assignment whose handler returns at once, or of
a model call a ``ScriptedModel`` answers at once, so what is measured is the path, not the
work: **in process** (``InProcessExecutor``, what a worker does today) against **pool**
(``StoreExecutor``: accept the key in the ledger; a ``Pool`` with its own store connection
claims it, starts it, performs it, settles it; the owner wakes, by a PostgreSQL notice or
SQLite's poll, and reads the outcome). The pool runs as a task of this process on its own
connection: the database round trips, the notice and the poll are the real ones, the process
boundary's scheduling is not counted. Calls run one after another (latency, not throughput).
SQLite has no notices: both sides read after 1 ms and half as late again each time, the pool
for work up to its 20 ms poll here (``stead executor --poll``), from 1 ms again after each
claim that took something, the owner for the settle up to the ledger's 50 ms interval;
PostgreSQL wakes both sides by notice (the pool's poll is its default 0.5 s, a backstop for a
lost notice). PostgreSQL is a throwaway local server
(``stead.testing.temporary_postgres``, durable) unless ``STEAD_BENCH_POSTGRES_URL`` is set;
without the server binaries its rows are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import stead  # noqa: E402
from stead.core.effects import Assignment, AssignmentKey, ModelBody, ToolBody  # noqa: E402
from stead.core.messages import UserMessage, message_to_json  # noqa: E402
from stead.runtime import InProcessExecutor, Pool, StoreExecutor  # noqa: E402
from stead.store import open_store  # noqa: E402
from stead.testing import ScriptedModel  # noqa: E402


@stead.tool(effect="read_only", queue="bench")
async def echo(x: int) -> int:
    """Return x."""
    return x


AGENT = stead.Agent("bench", ScriptedModel(["-"]), tools=[echo])


REQUEST = {
    "model": "scripted", "system": "", "tools": [], "max_output_tokens": None,
    "messages": [message_to_json(UserMessage(content="hi"))], "turn_index": 0, "settings": {},
}  # fmt: skip


def job(i: int, kind: str = "tool") -> Assignment:
    key = AssignmentKey(session_id="s", run_id=f"bench-{kind}-{i // 50}", effect_id=f"{kind}{i}")
    if kind == "model":
        return Assignment(
            key=key, body=ModelBody(model="scripted", request=REQUEST, request_digest="")
        )
    return Assignment(
        key=key,
        body=ToolBody(
            tool_name="echo", definition_digest="", arguments=f'{{"x": {i}}}',
            effect_class="read_only", replay_policy="rerun", tool_call_id=f"c{i}",
            turn_index=0, idempotency_key=f"k{i}", attempt=1,
        ),
    )  # fmt: skip


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


async def measure(url: str, calls: int, poll: float) -> dict[str, Any]:
    local = InProcessExecutor(AGENT.model, AGENT.registry)
    sig = stead.AbortSignal()
    here: dict[str, list[float]] = {"tool": [], "model": []}
    for kind, times in here.items():
        for i in range(calls):
            t = time.perf_counter()
            await local.run(job(i, kind), signal=sig)
            times.append(time.perf_counter() - t)
    store = open_store(url)
    pool = Pool(url, [AGENT], queues=["bench"], poll_interval=poll, lease_ttl=30)
    serving = asyncio.ensure_future(pool.run())
    owner = StoreExecutor(store, queue_of=lambda _: "bench")
    try:
        for _ in range(3000):  # the pool's first heartbeat makes the queue served
            if await owner.ledger.serves("bench", now=time.time()):
                break
            await asyncio.sleep(0.01)
        far: dict[str, list[float]] = {"tool": [], "model": []}
        for kind, times in far.items():
            await owner.run(job(calls, kind), signal=sig)  # warm-up
            for i in range(calls + 1, 2 * calls + 1):
                t = time.perf_counter()
                await owner.run(job(i, kind), signal=sig)
                times.append(time.perf_counter() - t)
    finally:
        pool.stop()
        pool.stop()
        await serving
        await pool.close()
        await owner.ledger.close()
        await store.close()
    ms = 1000.0
    return {
        kind: {
            "in_process_p50_ms": statistics.median(here[kind]) * ms,
            "pool_p50_ms": statistics.median(far[kind]) * ms,
            "pool_p99_ms": pct(far[kind], 0.99) * ms,
            "added_p50_ms": (statistics.median(far[kind]) - statistics.median(here[kind])) * ms,
            "added_p99_ms": (pct(far[kind], 0.99) - pct(here[kind], 0.99)) * ms,
        }
        for kind in here
    }


@contextlib.contextmanager
def postgres() -> Iterator[str | None]:
    if os.environ.get("STEAD_BENCH_POSTGRES_URL"):
        yield os.environ["STEAD_BENCH_POSTGRES_URL"]
        return
    from stead.testing import postgres_bindir, temporary_postgres

    if postgres_bindir() is None:
        yield None
        return
    with temporary_postgres(durable=True) as url:
        yield url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    calls = 30 if args.quick else 300
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        rows["sqlite"] = asyncio.run(measure(f"sqlite:///{tmp}/bench.db", calls, 0.02))
    with postgres() as url:
        if url is not None:
            rows["postgres"] = asyncio.run(measure(url, calls, 0.5))
    if args.json:
        print(json.dumps({"calls": calls, "rows": rows}, indent=2))
        return
    print(f"{calls} calls per kind and side, one at a time (ms; load {os.getloadavg()[0]:.1f})")
    print(
        f"{'store':10} {'call':6} {'in proc p50':>12} {'pool p50':>9} {'pool p99':>9} "
        f"{'+p50':>7} {'+p99':>7}"
    )
    for name, kinds in rows.items():
        for kind, r in kinds.items():
            print(
                f"{name:10} {kind:6} {r['in_process_p50_ms']:12.3f} {r['pool_p50_ms']:9.2f} "
                f"{r['pool_p99_ms']:9.2f} {r['added_p50_ms']:7.2f} {r['added_p99_ms']:7.2f}"
            )


if __name__ == "__main__":
    main()
