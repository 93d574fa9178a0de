"""Soak: four ``stead worker`` processes on PostgreSQL, one SIGKILLed and restarted every few
seconds while runs keep arriving.

Each run makes three tool turns covering every effect class — ``lookup_order`` (read_only)
and ``upsert_ticket`` (idempotent_write) together, then ``send_message`` (non_idempotent,
reconcilable), then ``charge_card`` (non_idempotent, nobody to ask) — and answers. Tools and
the model take tens of milliseconds, so kills land while calls are in flight.

Afterwards: every run is completed or waiting on a person (a charge in flight at a kill),
none lost, none stuck; no message sent and no card charged twice; no result recorded twice;
every history valid. The counts are printed.

``STEAD_SOAK_RUNS`` sets the size (80 in ``make test``; ``make soak`` runs 200).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import _fleet
import psycopg
import pytest
from _crash_harness import Scenario
from _soak import Churn, executions, verify
from _workers import WorkerProc

from stead.runtime import Runtime
from stead.store import open_store

RUNS = int(os.environ.get("STEAD_SOAK_RUNS", "80"))
WORKERS = 4
HARD_LIMIT = 300.0
"""The soak fails if the runs have not all come to rest by then (about 15 s on an idle
machine; far more beside three other xdist workers on a loaded one, where worker
restarts are slow)."""

pytestmark = pytest.mark.timeout(HARD_LIMIT + 60)


async def test_soak_four_workers_one_killed_every_few_seconds(
    pg_url: str, scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(pg_url)
    agent = _fleet.soak()
    generation = Counter[int]()

    def slot(i: int) -> WorkerProc:
        def spawn() -> WorkerProc:
            generation[i] += 1
            return WorkerProc(
                pg_url,
                tmp_path / f"worker{i}-{generation[i]}.log",
                "--concurrency", "6", "--lease-ttl", "2", "--poll", "0.2", "--grace", "5",
            )  # fmt: skip

        return spawn

    def busy(p: WorkerProc) -> bool:
        """The worker owns a run in flight (so killing it interrupts something)."""
        with psycopg.connect(pg_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM runs WHERE status = 'running' AND lease_owner LIKE %s",
                (f"%:{p.pid}:%",),
            ).fetchone()
        return bool(row and row[0])

    # Kills go round the workers, each once every worker is up and it owns a run: with one
    # down at a time and no run in hand, a loaded machine's slow restarts left a kill or two
    # that interrupted nothing (no recovery to check).
    churn = Churn(RUNS, [slot(i) for i in range(WORKERS)], random.Random(20240601), busy=busy)
    churn.hard_limit = HARD_LIMIT
    try:
        async with Runtime(store, agents=[agent]) as rt:
            run_ids = await churn.run(rt, store, agent)
            await churn.stop()
            tally = await verify(rt, store, run_ids)
            kills = len(churn.kills)
            assert kills > 0 and tally.recoveries > 0
            with capsys.disabled():
                print(
                    f"\nsoak: {RUNS} runs, {WORKERS} workers, {kills} SIGKILLs "
                    f"(+{kills} restarts) in {churn.elapsed:.1f}s\n"
                    f"  final: {dict(tally.final)}; lost 0, stuck 0\n"
                    f"  recoveries (run_recovered): {tally.recoveries}; "
                    f"results reconciled after a kill: {tally.reconciled}\n"
                    f"  executions: {executions()}\n"
                    f"  waiting on a person: {dict(tally.pending) or 0}; results recorded twice: 0"
                )
    finally:
        churn.close()
        await store.close()
