"""Retention of the text processes stream for watchers (``Runtime(share_progress=True)``),
on SQLite and PostgreSQL: a process SIGKILLed mid-stream leaves its turn's text in the store
(it would have deleted it at its next turn or its close); a prune deletes it once the dead
process's lease on the run has lapsed, and keeps the text of a stream whose writer still
holds its run. Times are the pruning Runtime's clock, set from the leases in the store."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shared_progress_child import CHUNKS

import stead
from _spawn import python_popen
from _wait import until
from stead.core.retention import Retention

CHILD = Path(__file__).with_name("shared_progress_child.py")
WHOLE = "".join(CHUNKS)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'r.db'}"
    else:
        yield request.getfixturevalue("pg_url")


def read(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """One read of the store from outside any Runtime (``?`` placeholders)."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(sql, params).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql.replace("?", "%s").encode(), params).fetchall()


def shared_text(url: str, run_id: str) -> str:
    """The text shared for ``run_id``'s first turn, as a watcher reads it."""
    rows = read(url, "SELECT text FROM ledger_progress WHERE effect_id = ? ORDER BY seq",
                f"run:{run_id}:0")  # fmt: skip
    return "".join(str(r[0]) for r in rows)


def lease_lapses(url: str, run_id: str) -> float:
    rows = read(url, "SELECT lease_expires_at FROM runs WHERE run_id = ?", run_id)
    return float(rows[0][0]) if rows and rows[0][0] is not None else 0.0


async def test_a_killed_streams_text_is_pruned_once_its_lease_lapsed_and_a_live_ones_kept(
    url: str,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_CRASH")}
    children = {rid: python_popen(CHILD, url, rid, env=env) for rid in ("run_dead", "run_live")}
    now = [0.0]
    try:
        async with stead.Runtime(url, clock=lambda: now[0]) as rt:
            for rid in children:  # both processes are mid-stream, their text shared
                await asyncio.to_thread(
                    until, lambda r=rid: shared_text(url, r) == WHOLE, f"{rid}'s text shared"
                )
            dead = children["run_dead"]
            dead.send_signal(signal.SIGKILL)
            await asyncio.to_thread(dead.wait, 30)
            lapses = lease_lapses(url, "run_dead")
            assert lapses > 0  # the dead process still holds the run, on paper

            # Until its lease lapses, the store cannot tell the dead writer from a live one.
            now[0] = lapses - 1
            pruned = await rt.prune(Retention(), apply=True)
            assert (pruned.streams, pruned.runs) == (0, [])
            assert shared_text(url, "run_dead") == WHOLE

            # Once it has, the dead writer's text goes. The live writer's keeper renews its
            # lease past that time, and its text stays.
            now[0] = lapses + 1
            await asyncio.to_thread(
                until, lambda: lease_lapses(url, "run_live") > now[0], "the live lease renewed"
            )
            pruned = await rt.prune(Retention(), apply=True)
            assert (pruned.streams, pruned.runs) == (1, [])
            assert shared_text(url, "run_dead") == ""
            assert shared_text(url, "run_live") == WHOLE
            assert (await rt.get("run_dead")).status.value == "running"  # the run stays
    finally:
        for child in children.values():
            child.send_signal(signal.SIGKILL)
            child.wait(30)
