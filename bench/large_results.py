"""A run with many large tool results: bytes on disk against the distinct content, and the
time of a step late in the run against one early, with results stored by reference.

    .venv/bin/python bench/large_results.py            # 100 results of 1 MB each, SQLite
    .venv/bin/python bench/large_results.py --quick    # 10 results of 100 KB: does it work
    .venv/bin/python bench/large_results.py --json     # the same figures, machine-readable

One run on a fresh SQLite file, driven by a ``Runtime`` with a ``ScriptedModel``: each turn
the model asks for one call, and the tool returns a text of 1 MB that is new each time
(generated before the run: the tool itself costs nothing), then a final answer. Three ways:

* **in the row**: results kept in their event rows (``result_by_reference=None``, as before);
  the model reads every one whole.
* **handle**: results past 64 KB stored by reference; the model reads a marker and a note
  with the result's handle.
* **head**: the same, the model reads the first 2,000 characters and the note.

*distinct content* is the bytes of the distinct result texts; *on disk* what the SQLite file
grew by after a checkpoint. A *step* is the time from one model call to the next: the tool's
call, its result stored and committed, the next request built. *step 1* and *step N* are the
medians of the first ten and the last ten steps: SQLite checkpoints its WAL every few
megabytes, so every fourth step of 1 MB is two or three times as long as the others, and a
window of five can hold one such step or two (a window of ten holds two or three).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import stead
from stead.providers import ModelRequest
from stead.store.sqlite import SQLiteStore
from stead.testing import Reply, ScriptedModel

Mode = Literal["row", "handle", "head"]


def texts(count: int, size: int) -> list[str]:
    """``count`` different texts of ``size`` characters (ASCII: one byte each)."""
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz          \n"
    return ["".join(rng.choices(alphabet, k=size)) for _ in range(count)]


def sqlite_size(path: Path) -> int:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return path.stat().st_size


async def one_run(mode: Mode, pages: list[str], tmp: Path) -> dict[str, Any]:
    stamps: list[float] = []

    @stead.tool(effect="read_only")
    def fetch(page: int) -> str:
        """Fetch one large page."""
        return pages[page]

    def call(page: int) -> Any:
        def reply(request: ModelRequest) -> Reply:
            stamps.append(time.perf_counter())
            return Reply(tool_calls=[("fetch", {"page": page})])

        return reply

    def last(request: ModelRequest) -> str:
        stamps.append(time.perf_counter())
        return "Read them all."

    script = [call(i) for i in range(len(pages))] + [last]
    limits = stead.Limits(
        max_turns=len(pages) + 5,
        result_by_reference=None if mode == "row" else 65_536,
        large_result_view="handle" if mode == "row" else mode,
    )
    agent = stead.Agent("reader", ScriptedModel(script), [fetch], limits=limits)
    path = tmp / f"large-{uuid.uuid4().hex[:8]}.db"
    store = SQLiteStore(path)
    try:
        empty = sqlite_size(path)
        async with stead.Runtime(store, agents=[agent]) as rt:
            view = await rt.run(await rt.start(agent, "Read every page."))
            if view.status is not stead.RunStatus.COMPLETED:
                raise SystemExit(f"the run ended {view.status}: {view.error}")
    finally:
        await store.close()
    steps = [b - a for a, b in itertools.pairwise(stamps)]
    window = max(1, min(10, len(steps) // 3))
    first = statistics.median(steps[:window])
    late = statistics.median(steps[-window:])
    distinct = sum(len(p.encode()) for p in set(pages))
    disk = sqlite_size(path) - empty
    return {
        "mode": mode,
        "results": len(pages),
        "result_bytes": len(pages[0]),
        "distinct_content": distinct,
        "on_disk": disk,
        "disk_ratio": round(disk / distinct, 3),
        "step_first_ms": round(first * 1000, 2),
        "step_last_ms": round(late * 1000, 2),
        "step_ratio": round(late / first, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 results of 100 KB")
    parser.add_argument("--json", action="store_true", help="machine-readable")
    args = parser.parse_args()
    count, size = (10, 100_000) if args.quick else (100, 1_000_000)
    pages = texts(count, size)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("row", "handle", "head"):
            rows.append(asyncio.run(one_run(mode, pages, Path(tmp))))  # type: ignore[arg-type]
    if args.json:
        print(json.dumps({"rows": rows}))
        return
    print("| results | mode | distinct content | on disk | step 1 | step N | N / 1 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['results']} x {r['result_bytes'] / 1e6:g} MB | {r['mode']} "
            f"| {r['distinct_content'] / 1e6:.1f} MB | {r['on_disk'] / 1e6:.1f} MB "
            f"({r['disk_ratio']:.2f}x) | {r['step_first_ms']:.1f} ms "
            f"| {r['step_last_ms']:.1f} ms | {r['step_ratio']:.2f}x |"
        )


if __name__ == "__main__":
    main()
