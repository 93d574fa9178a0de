"""What PostgreSQL's append costs the client: Python calls and server transactions an append.

    .venv/bin/python bench/pg_append.py                        # 200 and 1,000 tool turns
    .venv/bin/python bench/pg_append.py --no-snapshots         # the appends alone
    PYTHONPATH=../other-checkout/src .venv/bin/python bench/pg_append.py   # another tree's store

One run of N tool turns whose results are about 1 KB that varies (as ``storage.py``), appended
a turn at a time (four events) straight to a ``PostgresStore`` on a throwaway server, with a
snapshot whenever 256 events have been appended since the last one (``OwnedRun``'s
cadence). No ``Runtime``: nothing time-based (lease renewals, watchers) runs beside the
appends, so the counts repeat from run to run, unlike a timing on a shared machine.

* **calls / append**: Python function calls under ``cProfile`` during the appends.
* **writes**: the transactions that wrote over the appends (transaction ids taken: each
  append is one statement, one transaction; a snapshot's new pieces are one more. Reads
  take none; ``pg_stat_database`` is flushed too lazily to count them).
* **snapshot CPU**: process CPU of one more snapshot of the run's final state alone
  (``_pack_snapshot`` where the tree has it, with its statements; else ``pack``) against
  ``pack`` of the whole state. After ``--no-snapshots`` it is the run's first, none of its
  pieces stored yet.

The event builders are the store suite's (``tests/store/_builders.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "store"))
from _builders import RunBuilder, result

from stead.store.postgres import PostgresStore
from stead.store.sql._store import pack
from throughput import postgres

EVERY = 256


def next_xid(url: str) -> int:
    """The server's next transaction id (this read takes one itself)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT txid_current()").fetchone()
    return int(row[0]) if row else 0


def turn(b: RunBuilder) -> None:
    t = b.next_turn
    (call,) = [e.tool_call_id for e in b.tool_turn(results=False)[2:]]
    b.add(result(t, call, content=random.Random(t).randbytes(500).hex()))


async def case(pg: str, turns: int, snapshots: bool) -> dict[str, Any]:
    schema = f"append_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    store = PostgresStore(f"{pg}?options=-csearch_path%3D{schema}", max_size=1)
    try:
        b = RunBuilder("run_" + uuid.uuid4().hex)
        await b.create(store)
        b.start()
        await b.flush(store)
        before = next_xid(pg)
        prof = cProfile.Profile()
        taken, last = 0, 0
        for _ in range(turns):
            turn(b)
            due = snapshots and b.state.seq - last >= EVERY
            prof.enable()
            await b.flush(store, snapshot=due)
            prof.disable()
            if due:
                taken, last = taken + 1, b.state.seq
        xacts = next_xid(pg) - before - 1
        calls = pstats.Stats(prof).total_calls  # type: ignore[attr-defined]
        state = b.state.to_json()
        encode = getattr(store, "_pack_snapshot", None)
        t0 = time.process_time()
        if encode is not None:
            await encode(b.run_id, state)
        else:
            pack(state)
        ours = time.process_time() - t0
        t0 = time.process_time()
        pack(state)
        whole = time.process_time() - t0
    finally:
        await store.close()
    return {
        "turns": turns,
        "appends": turns,
        "snapshots": taken,
        "calls_per_append": round(calls / turns, 1),
        "xacts": xacts,
        "snapshot_cpu_ms": round(ours * 1e3, 1),
        "whole_pack_cpu_ms": round(whole * 1e3, 1),
    }


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with postgres() as pg:
        for turns in (50,) if args.quick else (200, 1000):
            r = await case(pg, turns, not args.no_snapshots)
            rows.append(r)
            if not args.json:
                print(
                    f"{r['turns']:>5} turns  {r['snapshots']:>3} snapshots  "
                    f"{r['calls_per_append']:>7} calls/append  {r['xacts']:>5} writes  "
                    f"snapshot {r['snapshot_cpu_ms']:>6} ms CPU (whole pack "
                    f"{r['whole_pack_cpu_ms']} ms)",
                    flush=True,
                )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-snapshots", action="store_true", help="appends without snapshots")
    parser.add_argument("--quick", action="store_true", help="50 turns only")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    out = asyncio.run(main(parser.parse_args()))
    if "--json" in sys.argv:
        print(json.dumps(out, indent=2))
