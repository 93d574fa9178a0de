"""Bytes on disk per run against the run's content, on SQLite and PostgreSQL, in one run.

    .venv/bin/python bench/storage.py            # 200 and 1,000 tool turns, both stores
    .venv/bin/python bench/storage.py --quick    # 50 turns: does it work
    .venv/bin/python bench/storage.py --json     # the same figures, machine-readable

One run of N tool turns, driven by a ``Runtime`` with a ``ScriptedModel``: each turn the model
asks for one call, and the tool returns a result of about 1 KB (JSON text: a page of order
records whose values change from turn to turn, so it compresses as real tool output does, not
as a repeated string would); then a final answer.

* **content**: the JSON of the run's conversation (every message, as ``message_to_json``
  writes it): what a run is, without anything stead adds.
* **event JSON**: the bytes of the events' ``data`` as the codec writes them.
* **on disk**: what the store's location grows by for that one run. SQLite: the file after
  ``PRAGMA wal_checkpoint(TRUNCATE)`` (no WAL left beside it), less the size of the same
  store empty. PostgreSQL: a schema of its own on a throwaway server (fsync on, autovacuum
  off for its tables so that nothing runs at a moment of its choosing); the main forks of
  every table, TOAST table and index (the free-space and visibility maps are a few pages a
  table, not a run's), less the empty schema's, after a ``CHECKPOINT``. Row versions that an
  update left behind (every append updates the run's row; every snapshot replaces the last,
  since migration 0009 only its remainder: a long state's lists are stored in pieces, once)
  count there until a vacuum frees their space for reuse, so PostgreSQL has a second figure:
  after ``VACUUM``, less the free space it recorded (``pg_freespacemap``), the bytes the run
  holds once autovacuum has been by.

The goal is at most 2x the content on both stores, and linear: the ratio must not
grow with the number of turns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import stead
from stead.core.messages import message_to_json
from stead.store.sqlite import SQLiteStore
from stead.testing import Reply, ScriptedModel
from throughput import postgres  # the same throwaway server (or $STEAD_BENCH_POSTGRES_URL)

RESULT_BYTES = 1000
WORDS = [
    "shipped", "delivered", "pending", "returned", "cancelled", "warehouse", "north", "south",
    "east", "west", "express", "standard", "ground", "priority", "customer", "order",
    "invoice", "parcel", "label", "carrier", "tracking",
]  # fmt: skip


def result_text(turn: int) -> str:
    """About ``RESULT_BYTES`` of JSON that varies from turn to turn."""
    rng = random.Random(turn)
    records: list[dict[str, Any]] = []
    text = ""
    while len(text) < RESULT_BYTES - 60:
        records.append(
            {
                "order_id": f"ord-{rng.randrange(10**6):06d}",
                "status": rng.choice(WORDS),
                "eta": f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
                "total": round(rng.uniform(1, 999), 2),
                "note": " ".join(rng.choice(WORDS) for _ in range(3)),
            }
        )
        text = json.dumps({"page": turn, "orders": records})
    return text


@stead.tool(effect="read_only")
def search(page: int) -> str:
    """Fetch one page of orders."""
    return result_text(page)


def agent(turns: int) -> stead.Agent:
    replies: list[Reply | str] = [Reply(tool_calls=[("search", {"page": t})]) for t in range(turns)]
    replies.append("Every order is accounted for.")
    return stead.Agent(
        "pages",
        ScriptedModel(replies),
        tools=[search],
        system="You read every page of orders.",
        limits=stead.Limits(max_turns=turns + 10),
    )


async def one_run(store: Any, turns: int) -> dict[str, int]:
    """Drive one run of ``turns`` tool turns; its content and event bytes."""
    a = agent(turns)
    rt = stead.Runtime(store, agents=[a])
    run_id = await rt.start(a, "Read every page.")
    view = await rt.run(run_id)
    if view.status != stead.RunStatus.COMPLETED:
        raise SystemExit(f"the run ended {view.status}")
    state = await rt.state(run_id)
    content = len(json.dumps([message_to_json(m) for m in state.messages]).encode())
    events = [s.event for s in await store.read_events(run_id)]
    event_json = sum(len(json_bytes(e)) for e in events)
    return {"content": content, "event_json": event_json, "events": len(events)}


def json_bytes(event: Any) -> bytes:
    """The event's data as JSON, before the store compresses it (if it does)."""
    from stead.store.sql import _base

    data = _base.event_row(event)[4]
    unpack = getattr(_base, "unpack_data", lambda d: d)  # older trees: always text
    data = unpack(data)
    return data if isinstance(data, bytes) else data.encode("utf-8")


# -- SQLite -------------------------------------------------------------------------------


def sqlite_size(path: Path) -> int:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return path.stat().st_size


async def sqlite_case(turns: int, tmp: Path) -> dict[str, Any]:
    path = tmp / f"storage-{uuid.uuid4().hex[:8]}.db"
    store = SQLiteStore(path)
    try:
        empty = sqlite_size(path)
        out = await one_run(store, turns)
    finally:
        await store.close()
    full = sqlite_size(path)
    return {**out, "disk": full - empty, "disk_vacuumed": None}


# -- PostgreSQL ---------------------------------------------------------------------------


RELATIONS = (
    "WITH t AS (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND c.relkind = 'r'), "
    "h AS (SELECT oid FROM t UNION SELECT reltoastrelid FROM pg_class "
    "WHERE oid IN (SELECT oid FROM t) AND reltoastrelid <> 0) "
    "SELECT oid FROM h UNION SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM h)"
)
"""Every table of the schema, their TOAST tables, and the indexes of both."""


def pg_size(url: str, schema: str, vacuum: bool = False) -> int:
    """Bytes of the schema's relations (main forks of tables, TOAST and indexes; the free
    space and visibility maps are a few pages a table, not a run's). With ``vacuum``: after
    a VACUUM, less the free space it recorded (``pg_freespacemap``), i.e. the bytes in use."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (t,) in tables if vacuum else ():
            conn.execute(f"VACUUM {schema}.{t}".encode())
        conn.execute("CHECKPOINT")
        free = "0"
        if vacuum:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_freespacemap")
            free = "(SELECT COALESCE(SUM(avail), 0) FROM pg_freespace(r.oid))"
        row = conn.execute(
            f"SELECT COALESCE(SUM(pg_relation_size(r.oid, 'main') - {free}), 0) "
            f"FROM ({RELATIONS}) r".encode(),
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


async def postgres_case(pg: str, turns: int) -> dict[str, Any]:
    import psycopg

    from stead.store.postgres import PostgresStore

    schema = f"storage_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
        # autovacuum would run at a moment of its choosing: off, so both figures are exact
    url = f"{pg}{'&' if '?' in pg else '?'}options=-csearch_path%3D{schema}"
    store = PostgresStore(url)
    try:
        with psycopg.connect(pg, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall()
            for (t,) in tables:
                conn.execute(
                    f"ALTER TABLE {schema}.{t} SET (autovacuum_enabled = false, "
                    "toast.autovacuum_enabled = false)".encode()
                )
        empty = pg_size(pg, schema)
        out = await one_run(store, turns)
    finally:
        await store.close()
    full = pg_size(pg, schema)
    vacuumed = pg_size(pg, schema, vacuum=True)
    return {**out, "disk": full - empty, "disk_vacuumed": vacuumed - empty}


# -- the report ---------------------------------------------------------------------------


def line(r: dict[str, Any]) -> str:
    vac = r["disk_vacuumed"]
    after = f"{vac / 1e6:8.2f} MB {vac / r['content']:5.2f}x" if vac is not None else " " * 17
    return (
        f"{r['store']:<10} {r['turns']:>6} {r['events']:>7} {r['content'] / 1e6:8.2f} MB "
        f"{r['event_json'] / 1e6:8.2f} MB {r['disk'] / 1e6:8.2f} MB "
        f"{r['disk'] / r['content']:5.2f}x {after}"
    )


HEAD = (
    f"{'store':<10} {'turns':>6} {'events':>7} {'content':>11} {'event JSON':>11} "
    f"{'on disk':>11} {'ratio':>6} {'after VACUUM':>17}"
)


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    sizes = (50,) if args.quick else (200, 1000)
    rows: list[dict[str, Any]] = []
    if not args.json:
        print(HEAD)
        print("-" * len(HEAD))
    with tempfile.TemporaryDirectory(prefix="stead-storage-") as d, postgres() as pg:
        for turns in sizes:
            for name in ("sqlite", "postgres"):
                if name == "sqlite":
                    r = await sqlite_case(turns, Path(d))
                else:
                    r = await postgres_case(pg, turns)
                r.update(store=name, turns=turns)
                rows.append(r)
                if not args.json:
                    print(line(r), flush=True)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="50 turns only")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    result = asyncio.run(main(parser.parse_args()))
    if "--json" in sys.argv:
        print(json.dumps(result, indent=2))
