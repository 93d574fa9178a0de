"""Which pages does each commit of a run write? The WAL of one run, commit by commit, by b-tree.

    .venv/bin/python bench/pages.py                      # the effects row, after 15 runs
    .venv/bin/python bench/pages.py read_only floor      # any rows of bench/overhead.py
    .venv/bin/python bench/pages.py --warm 100 effects   # on a store that holds 100 runs

An fsync flushes the pages written since the one before it (unsynced commits' included), and
a checkpoint copies them to the database file, so the pages a commit changes are what a step
costs the disk beside its fsync. This runs ``--warm`` runs of the row's workload
(``bench/overhead.py``: 10 tool turns, 21 steps) on a fresh file, empties the WAL
(``wal_checkpoint(TRUNCATE)``), runs one more, then reads the WAL it wrote: each frame names
its page, and a frame whose "database size after commit" field is set ends a commit
(sqlite.org/fileformat2.html, "WAL file format"). SQLite's ``dbstat`` table names the b-tree
that owns each page (``sqlite_schema`` is page 1, whose header holds the database's size: a
commit that grows the file writes it). Untimed; the counts move by a page or two with the
size of the store (a random run id lands in a fuller or an emptier page of an index).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import struct
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import overhead
import stead


def commits_in_wal(path: str) -> list[Counter[str]]:
    """Pages the WAL beside ``path`` holds, commit by commit, counted by owning b-tree."""
    data = Path(path + "-wal").read_bytes()
    if len(data) < 32:
        return []
    page_size = struct.unpack(">I", data[8:12])[0]
    with contextlib.closing(sqlite3.connect(path)) as db:
        owners = dict(db.execute("SELECT pageno, name FROM dbstat"))
    commits: list[Counter[str]] = []
    current: Counter[str] = Counter()
    offset = 32
    while offset + 24 + page_size <= len(data):
        page, size_after = struct.unpack(">II", data[offset : offset + 8])
        current[owners.get(page, f"page {page}")] += 1
        if size_after:  # the last frame of a commit
            commits.append(current)
            current = Counter()
        offset += 24 + page_size
    return commits


async def one_row(row: str, warm: int, directory: str) -> list[Counter[str]]:
    """The commits of one run of ``row`` (a stead row of overhead.py, or ``floor``)."""
    path = os.path.join(directory, f"{row}.db")
    close: Callable[[], Awaitable[None]]
    if row == overhead.FLOOR:
        db = overhead.open_floor(path)
        model = overhead.script()
        tool = overhead.agent_for("read_only").registry.get("lookup")
        assert tool is not None
        schemas = (tool.schema(),)

        async def run() -> None:
            await overhead.floor_run(db, model, overhead.lookup, schemas)

        async def close_floor() -> None:
            db.close()

        close = close_floor
    else:
        agent = overhead.agent_for(row)
        rt = stead.Runtime(f"sqlite:///{path}", agents=[agent])

        async def run() -> None:
            await overhead.stead_run(rt, agent)

        close = rt.close
    try:
        for _ in range(warm):
            await run()
        with contextlib.closing(sqlite3.connect(path)) as side:
            overhead.empty_wal(side)
        await run()
        return commits_in_wal(path)
    finally:
        await close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    rows = (overhead.FLOOR, *overhead.VARIANTS)
    parser.add_argument("rows", nargs="*", default=["effects"], help=f"any of {', '.join(rows)}")
    parser.add_argument("--warm", type=int, default=15, help="runs before the counted one (15)")
    parser.add_argument("--dir", help="where the SQLite files go (default: a new temp dir)")
    args = parser.parse_args(argv)
    unknown = [r for r in args.rows if r not in rows]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {', '.join(rows)}")
    with tempfile.TemporaryDirectory(prefix="stead-pages-", dir=args.dir) as directory:
        for row in args.rows:
            commits = asyncio.run(one_row(row, args.warm, directory))
            total: Counter[str] = sum(commits, Counter())
            print(f"{row}: {sum(total.values())} pages in {len(commits)} commits")
            for i, commit in enumerate(commits, 1):
                parts = ", ".join(f"{name} {n}" for name, n in commit.most_common())
                print(f"  commit {i:>2}: {sum(commit.values()):>3}  {parts}")
            print(f"  by b-tree: {', '.join(f'{k} {n}' for k, n in total.most_common())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
