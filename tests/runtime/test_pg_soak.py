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

import asyncio
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import _fleet
import pytest
from _crash_harness import Scenario
from _scenario import delivered, ledger
from _workers import WorkerProc, statuses

from stead.core.canonical import idempotency_key
from stead.core.events import RunRecovered, ToolResultRecorded
from stead.runtime import Runtime
from stead.store import open_store
from stead.testing import assert_valid_history

RUNS = int(os.environ.get("STEAD_SOAK_RUNS", "80"))
WORKERS = 4
ARRIVALS_PER_S = 8.0
KILL_EVERY = (1.0, 2.5)
"""Seconds between kills, drawn uniformly."""
HARD_LIMIT = 300.0
"""The soak fails if the runs have not all come to rest by then (about 15 s on an idle
machine; far more beside three other xdist workers on a loaded one, where worker
restarts are slow)."""
RESTING = {"completed", "failed", "cancelled", "timed_out", "awaiting_approval"}

pytestmark = pytest.mark.timeout(HARD_LIMIT + 60)


async def test_soak_four_workers_one_killed_every_few_seconds(
    pg_url: str, scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(20240601)
    store = open_store(pg_url)
    agent = _fleet.soak()
    generation = Counter[int]()

    def spawn(slot: int) -> WorkerProc:
        generation[slot] += 1
        return WorkerProc(
            pg_url,
            tmp_path / f"worker{slot}-{generation[slot]}.log",
            "--concurrency", "6", "--lease-ttl", "2", "--poll", "0.2", "--grace", "5",
        )  # fmt: skip

    workers = [spawn(i) for i in range(WORKERS)]
    kills = 0
    run_ids: list[str] = []
    started = time.monotonic()
    try:
        async with Runtime(store, agents=[agent]) as rt:
            next_kill = started + rng.uniform(*KILL_EVERY)
            while True:
                now = time.monotonic()
                assert now - started < HARD_LIMIT, f"not at rest: {await statuses(store)}"
                while len(run_ids) < RUNS and len(run_ids) < (now - started) * ARRIVALS_PER_S:
                    run_ids.append(await rt.start(agent, f"order {len(run_ids)}"))
                counts = await statuses(store)
                at_rest = len(run_ids) == RUNS and set(counts) <= RESTING
                if at_rest:
                    break
                if now >= next_kill:
                    slot = rng.randrange(WORKERS)
                    workers[slot].kill()
                    workers[slot] = spawn(slot)
                    kills += 1
                    next_kill = now + rng.uniform(*KILL_EVERY)
                await asyncio.sleep(0.1)
            elapsed = time.monotonic() - started
            for w in workers:
                w.signal(signal.SIGTERM)
            for w in workers:
                code = await asyncio.to_thread(w.wait)
                # 0 after a graceful stop; a worker restarted a moment ago may still be
                # importing, before it handles SIGTERM (it holds nothing yet)
                assert code == 0 or (code == -signal.SIGTERM and " ready: " not in w.text()), (
                    code,
                    w.text()[-2000:],
                )

            # -- none lost, none stuck -------------------------------------------------------
            records = await store.list_runs(limit=100_000)
            assert sorted(r.run_id for r in records) == sorted(run_ids)
            final = Counter(r.status for r in records)
            assert set(final) <= {"completed", "awaiting_approval"}, final

            # -- each result once, each history valid, each non_idempotent effect at most once
            recoveries = reconciled = 0
            pending: Counter[str] = Counter()
            for rid in run_ids:
                events = [e.event for e in await rt.events(rid)]
                results = Counter(
                    (e.turn_index, e.tool_call_id)
                    for e in events
                    if isinstance(e, ToolResultRecorded)
                )
                assert set(results.values()) <= {1}, (rid, results)
                recoveries += sum(isinstance(e, RunRecovered) for e in events)
                reconciled += sum(
                    isinstance(e, ToolResultRecorded) and e.source == "reconciled" for e in events
                )
                state = await rt.state(rid)
                assert_valid_history(state)
                for approval in state.approvals.values():
                    pending[state.calls[approval.tool_call_id].name] += 1
                messages = delivered(idempotency_key(rid, "call_1_0"))
                charges = ledger().count("charge_card", idempotency_key(rid, "call_2_0"))
                assert len(messages) <= 1, (rid, messages)
                assert charges <= 1, (rid, charges)
                if state.status.value == "completed":
                    assert (len(messages), charges) == (1, 1), rid
                    assert ledger().count("lookup_order", idempotency_key(rid, "call_0_0")) >= 1
                    assert ledger().count("upsert_ticket", idempotency_key(rid, "call_0_1")) >= 1
            assert set(pending) <= {"charge_card"}, pending
            assert kills > 0 and recoveries > 0
            with capsys.disabled():
                print(
                    f"\nsoak: {RUNS} runs, {WORKERS} workers, {kills} SIGKILLs "
                    f"(+{kills} restarts) in {elapsed:.1f}s\n"
                    f"  final: {dict(final)}; lost 0, stuck 0\n"
                    f"  recoveries (run_recovered): {recoveries}; "
                    f"results reconciled after a kill: {reconciled}\n"
                    f"  executions: lookup_order {ledger().count('lookup_order')}, "
                    f"upsert_ticket {ledger().count('upsert_ticket')}, "
                    f"send_message {len(delivered())} (max 1 per call), "
                    f"charge_card {ledger().count('charge_card')} (max 1 per call)\n"
                    f"  waiting on a person: {dict(pending) or 0}; results recorded twice: 0"
                )
    finally:
        for w in workers:
            w.stop()
        await store.close()
