"""Resident memory a worker spends per run it holds waiting, on SQLite and PostgreSQL.

    .venv/bin/python bench/held.py              # 1,000 runs, both stores
    .venv/bin/python bench/held.py --runs 200   # quicker
    .venv/bin/python bench/held.py --json

One ``stead worker`` process with ``--concurrency`` as large as the number of runs; that many
runs of an agent whose model call takes an hour (``throughput.py``'s ``held`` agent). Once all
are claimed and waiting in their model call, the worker's resident set (``VmRSS``) is read and
compared with the same worker idle before the runs arrived: (holding - idle) / runs. This is
``throughput.py``'s memory measurement on its own, so that it can be repeated without the
throughput rounds (``PYTHONPATH=<other tree>/src`` measures another tree: the worker process
inherits it). A run waiting on a person holds nothing: its worker released it.

What a held run keeps: the folded state; the coroutine frames of its drive (worker task, run
loop, executor, the model call); its entry in the Runtime's keeper (one task renews and
watches every run: one statement each a beat, whatever the number of runs); its abort
signal; its progress window. The goal is at most 20 KiB a run on both stores.
Two choices keep it there on PostgreSQL. The keeper reads every held run's row and renews
every lease in one statement a beat: a read and a renewal per run would queue hundreds of
reads on the connection pool at any moment, each with its task, futures and pool waiter
(tracemalloc by file: ``asyncio``, ``psycopg_pool``, ``contextlib``), about 9 KiB a run. And
the loads of a thousand runs claimed at once queue on the store's semaphore (one future
each), not inside the pool (a client, a condition, a ``wait_for`` task and a timer each,
about 4 KiB, and a heap left fragmented after they settle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from throughput import fresh_url, memory, postgres


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    with tempfile.TemporaryDirectory(prefix="stead-held-") as d, postgres() as pg:
        for backend in args.stores:
            m = await memory(fresh_url(backend, pg, Path(d)), args.runs, Path(d))
            m["backend"] = backend
            out.append(m)
            if not args.json:
                print(
                    f"{backend:<9} idle {m['idle_mib']:6.1f} MiB, holding {m['runs']} waiting runs "
                    f"{m['holding_mib']:6.1f} MiB: {m['per_run_kib']:5.1f} KiB a run",
                    flush=True,
                )
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs held at once")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument(
        "--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"]
    )
    args = parser.parse_args()
    result = asyncio.run(main(args))
    if args.json:
        print(json.dumps(result, indent=2))
