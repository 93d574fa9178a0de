"""A child process for the group-commit crash test.

    python _batch_child.py URL RUNS KILL_AT [PACE_LIMIT]

Creates RUNS runs and appends to all of them at once, round after round, printing
``ack RUN SEQ`` (flushed) each time an append returns. When the KILL_AT-th batch has
committed, before any of its callers is told, it prints ``committed RUN...`` and SIGKILLs
itself: the parent then checks that every acknowledged event is in the store. On SQLite,
PACE_LIMIT sets ``store.pace.limit`` (``inf``: every batch commits on the loop, ``0``: on the
writer thread).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _builders import T0, created

from stead.core.events import ModelCallFailed
from stead.store import open_store


async def main(url: str, runs: int, kill_at: int, pace: float | None) -> None:
    store = open_store(url)
    if pace is not None:
        store.pace.limit = pace  # type: ignore[attr-defined]
    batches = 0

    def after_batch(run_ids: Sequence[str]) -> None:
        nonlocal batches
        batches += 1
        if batches == kill_at:
            print("committed", *run_ids, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    store.group.after_batch = after_batch  # type: ignore[attr-defined]
    ids = [f"run-{i}" for i in range(runs)]
    for rid in ids:
        await store.create_run(created(rid), now=T0)

    async def one(rid: str) -> None:
        seq = 1
        for attempt in range(1, 50):
            event = ModelCallFailed(
                turn_index=0, attempt=attempt, code="rate_limited", message="again"
            )
            seq = await store.append(
                rid, [event], expected_seq=seq, epoch=0, status="queued", now=T0 + attempt
            )
            print("ack", rid, seq, flush=True)

    await asyncio.gather(*(one(rid) for rid in ids))
    print("not killed", flush=True)


if __name__ == "__main__":
    pace = float(sys.argv[4]) if len(sys.argv) > 4 else None
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), pace))
