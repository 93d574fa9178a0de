"""Soak with executor pools: two ``stead worker`` processes own the runs and two ``stead
executor`` processes perform their effects, on PostgreSQL; any one of the four is SIGKILLed and
started again every second or two while runs keep arriving.

The runs are the soak's (``_fleet.pooled_soak``): a read_only and an idempotent_write call
together, a non_idempotent call with a reconcile function, a non_idempotent call nobody can
ask about, and an answer; every tool call goes to queue ``soak`` and every model call to queue
``soak-model``, both served by the executors. A kill lands on a worker while an executor
holds its effect, or on an executor while it performs one.

Afterwards: every run completed or waits on a person (a charge in flight at a kill), none lost,
none stuck; no message sent and no card charged twice; no result recorded twice; every history
valid; in the execution ledger no key settled twice, none left open, and the executors did the
work (tool and model keys settled there).

``STEAD_POOL_SOAK_RUNS`` sets the size (20 in ``make test``; ``make soak`` runs 200).
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
from stead.store.ledger._ledger import ledger_for

RUNS = int(os.environ.get("STEAD_POOL_SOAK_RUNS", "20"))
WORKERS = EXECUTORS = 2
"""Killed in turn: worker0, executor0, worker1, executor1, worker0, ..."""
HARD_LIMIT = 240.0 + RUNS * 0.5
"""The soak fails if the runs have not all come to rest by then."""

pytestmark = pytest.mark.timeout(HARD_LIMIT + 60)


async def test_pool_soak_workers_and_executors_killed_every_few_seconds(
    pg_url: str, scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(pg_url)
    agent = _fleet.pooled_soak()
    generation = Counter[str]()
    queues = f"{_fleet.POOL_QUEUE},{_fleet.POOL_MODEL_QUEUE}"

    def slot(name: str) -> WorkerProc:
        generation[name] += 1
        log = tmp_path / f"{name}-{generation[name]}.log"
        common = ("--lease-ttl", "2", "--poll", "0.2", "--grace", "2")
        if name.startswith("executor"):
            return WorkerProc(
                pg_url, log, "--queues", queues, "--concurrency", "8", *common,
                command="executor",
            )  # fmt: skip
        return WorkerProc(pg_url, log, "--concurrency", "6", *common)

    def busy(p: WorkerProc) -> bool:
        """A worker owns a run in flight, or an executor holds an effect."""
        with psycopg.connect(pg_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM runs WHERE status = 'running' "
                "AND lease_owner LIKE %s) + (SELECT count(*) FROM ledger_keys "
                "WHERE phase IN ('claimed', 'started') AND executor LIKE %s)",
                (f"%:{p.pid}:%", f"%-{p.pid}-%"),
            ).fetchone()
        return bool(row and row[0])

    names = [f"{kind}{i}" for i in range(WORKERS) for kind in ("worker", "executor")]
    churn = Churn(
        RUNS,
        [lambda n=n: slot(n) for n in names],  # type: ignore[misc]
        random.Random(20261201),
        kill_every=(0.8, 2.0),
        hard_limit=HARD_LIMIT,
        busy=busy,
        min_kills=2,  # a worker and then an executor, each with work in hand
    )
    ledger = ledger_for(store)
    try:
        async with Runtime(store, agents=[agent]) as rt:
            run_ids = await churn.run(rt, store, agent)
            await churn.stop()
            tally = await verify(rt, store, run_ids)

            # -- the execution ledger: each key settled at most once, none left open --------
            phases: Counter[str] = Counter()
            remote: Counter[str] = Counter()
            for rid in run_ids:
                for key in await ledger.keys(rid):
                    kinds = [e.kind for e in await ledger.history(key)]
                    assert kinds.count("settled") <= 1 and kinds.count("accepted") <= 1, kinds
                    row = await ledger.read(key, now=0.0)
                    assert row is not None
                    phases[row.phase] += 1
                    if "claimed" in kinds and row.outcome is not None:
                        remote["model" if row.outcome["kind"].startswith("model") else "tool"] += 1
            assert set(phases) <= {"settled", "acknowledged", "aborted"}, phases
            assert remote["tool"] > 0 and remote["model"] > 0, remote
            assert len(churn.kills) >= 2 and tally.recoveries > 0  # a worker and an executor
            killed = Counter(names[k].rstrip("0123456789") for k in churn.kills)
            with capsys.disabled():
                print(
                    f"\npool soak: {len(run_ids)} runs, {WORKERS} workers + {EXECUTORS} executors, "
                    f"{len(churn.kills)} SIGKILLs ({dict(killed)}) in {churn.elapsed:.1f}s\n"
                    f"  final: {dict(tally.final)}; lost 0, stuck 0\n"
                    f"  recoveries (run_recovered): {tally.recoveries}; "
                    f"results reconciled after a kill: {tally.reconciled}\n"
                    f"  ledger keys: {dict(phases)}; performed by executors: {dict(remote)}\n"
                    f"  executions: {executions()}\n"
                    f"  waiting on a person: {dict(tally.pending) or 0}; results recorded twice: 0"
                )
    finally:
        churn.close()
        await ledger.close()
        await store.close()
