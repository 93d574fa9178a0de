"""The soaks' scaffolding: processes SIGKILLed and restarted while runs arrive, then the checks
(none lost, none stuck, no non_idempotent effect twice, no result recorded twice, every
history valid). ``test_pg_soak.py`` churns ``stead worker`` processes; ``test_pool_soak.py``
churns workers and ``stead executor`` processes together.

The runs are the ``_fleet`` soak's: ``lookup_order`` (read_only) and ``upsert_ticket``
(idempotent_write) together, then ``send_message`` (non_idempotent, reconcilable), then
``charge_card`` (non_idempotent, nobody to ask), then an answer; the checks count the side
effects by the calls' idempotency keys, whichever agent (pooled or not) made them.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from _scenario import delivered, side_effects
from _workers import WorkerProc, statuses

import stead
from stead.core.canonical import idempotency_key
from stead.core.events import RunRecovered, ToolResultRecorded
from stead.runtime import Runtime
from stead.store import Store
from stead.testing import assert_valid_history

RESTING = {"completed", "failed", "cancelled", "timed_out", "awaiting_approval"}


@dataclass
class Churn:
    """Runs arriving while one of the ``slots`` processes at a time is SIGKILLed and started
    again."""

    runs: int
    slots: list[Callable[[], WorkerProc]]
    """One way to start each slot's process (again, after a kill)."""
    rng: random.Random
    arrivals_per_s: float = 8.0
    kill_every: tuple[float, float] = (1.0, 2.5)
    """Seconds between kills, drawn uniformly."""
    hard_limit: float = 100.0
    """It fails if the runs have not all come to rest by then."""
    busy: Callable[[WorkerProc], bool] | None = None
    """With it, the kills go round the slots in order, each once that slot's process has
    work in hand, so that every kill interrupts something and every slot is killed."""
    procs: list[WorkerProc] = field(default_factory=list)
    kills: list[int] = field(default_factory=list)
    """The slot of each kill."""
    elapsed: float = 0.0
    min_kills: int = 0
    """Kills the soak must make before it ends: while fewer were made, runs keep arriving
    past ``runs`` (a few more each time the rest came to rest), so that on a machine where a
    killed process takes longer to start again than the runs take to finish, the slots after
    the first are still killed with work in hand."""

    async def run(self, rt: Runtime, store: Store, agent: stead.Agent) -> list[str]:
        """Start every slot, start the runs, kill and restart until all rest; their ids."""
        self.procs = [start() for start in self.slots]
        run_ids: list[str] = []
        started = time.monotonic()
        next_kill = started + self.rng.uniform(*self.kill_every)
        while True:
            now = time.monotonic()
            assert now - started < self.hard_limit, f"not at rest: {await statuses(store)}"
            while len(run_ids) < self.runs and len(run_ids) < (now - started) * self.arrivals_per_s:
                run_ids.append(await rt.start(agent, f"order {len(run_ids)}"))
            if len(run_ids) == self.runs and set(await statuses(store)) <= RESTING:
                if len(self.kills) >= self.min_kills:
                    break
                self.runs += 4
            slot = self._victim() if now >= next_kill else None
            if slot is not None:
                self.procs[slot].kill()
                self.procs[slot] = self.slots[slot]()
                self.kills.append(slot)
                next_kill = now + self.rng.uniform(*self.kill_every)
            await asyncio.sleep(0.1)
        self.elapsed = time.monotonic() - started
        return run_ids

    def _victim(self) -> int | None:
        """The slot to kill now, if any, once every process is up (one down at a time: under
        load a start takes seconds): without ``busy``, any; with it, the next in turn once it
        has work in hand. A process still starting holds nothing (it claims after it says it
        is ready): killing it too stalled the soak on a loaded machine, where a start outlasts
        the 1-2.5 s between kills, with runs left in flight for minutes; so did killing any
        process that was up while others were still starting (the kills then outpace the
        restarts, and runs stay in flight past the test's limit)."""
        if not all(p.ready() for p in self.procs):
            return None
        if self.busy is None:
            return self.rng.randrange(len(self.procs))
        turn = len(self.kills) % len(self.slots)
        return turn if self.busy(self.procs[turn]) else None

    async def stop(self) -> None:
        """SIGTERM every process: each exits 0 (a process restarted a moment ago may still
        be importing, before it handles SIGTERM: it holds nothing yet)."""
        for p in self.procs:
            p.signal(signal.SIGTERM)
        for p in self.procs:
            code = await asyncio.to_thread(p.wait)
            assert code == 0 or (code == -signal.SIGTERM and not p.ready()), (
                code,
                p.text()[-2000:],
            )

    def close(self) -> None:
        for p in self.procs:
            p.stop()


@dataclass
class Tally:
    """What the checks counted."""

    final: Counter[str]
    recoveries: int
    reconciled: int
    pending: Counter[str]


async def verify(rt: Runtime, store: Store, run_ids: list[str]) -> Tally:
    """None lost, none stuck (each run completed, or waits on a person for a charge in flight
    at a kill); each result once, each history valid, each non_idempotent effect at most once
    (exactly once in a completed run)."""
    records = await store.list_runs(limit=100_000)
    assert sorted(r.run_id for r in records) == sorted(run_ids)
    final = Counter(r.status for r in records)
    assert set(final) <= {"completed", "awaiting_approval"}, final
    recoveries = reconciled = 0
    pending: Counter[str] = Counter()
    for rid in run_ids:
        events = [e.event for e in await rt.events(rid)]
        results = Counter(
            (e.turn_index, e.tool_call_id) for e in events if isinstance(e, ToolResultRecorded)
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
        charges = side_effects().count("charge_card", idempotency_key(rid, "call_2_0"))
        assert len(messages) <= 1, (rid, messages)
        assert charges <= 1, (rid, charges)
        if state.status.value == "completed":
            assert (len(messages), charges) == (1, 1), rid
            assert side_effects().count("lookup_order", idempotency_key(rid, "call_0_0")) >= 1
            assert side_effects().count("upsert_ticket", idempotency_key(rid, "call_0_1")) >= 1
    assert {name.removeprefix("pooled_") for name in pending} <= {"charge_card"}, pending
    return Tally(final, recoveries, reconciled, pending)


def executions() -> str:
    """The side effects, counted, for the soak's printout."""
    return (
        f"lookup_order {side_effects().count('lookup_order')}, "
        f"upsert_ticket {side_effects().count('upsert_ticket')}, "
        f"send_message {len(delivered())} (max 1 per call), "
        f"charge_card {side_effects().count('charge_card')} (max 1 per call)"
    )
