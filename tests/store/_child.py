"""A child process for the store's multi-process tests.

    python _child.py claim  URL GO OWNER RUN_ID...     claim each run; print the ones won
    python _child.py append URL GO WORKER RUN_ID COUNT  append COUNT events, retrying conflicts
    python _child.py open   URL GO RUN_ID               open (migrate) the store, create a run
    python _child.py commit URL RUN_ID EXPECTED EPOCH STATUS < events   append one batch

Barrier: a child prints ``ready`` once set up, then waits until the file GO exists, so the
parent can start all of them at the same moment. The result is one JSON line on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _builders import created, from_wire

from stead.core.events import ModelCallFailed
from stead.errors import Conflict, LeaseHeld
from stead.store import Store, open_store


def barrier(go: str) -> None:
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.0005)


def done(result: object) -> None:
    print(json.dumps(result), flush=True)


async def claim(store: Store, owner: str, run_ids: list[str]) -> None:
    won = {}
    for run_id in run_ids:
        with contextlib.suppress(LeaseHeld):
            won[run_id] = await store.claim(run_id, owner=owner, now=time.time(), ttl=60)
    done({"owner": owner, "won": won})


async def append(store: Store, worker: str, run_id: str, count: int) -> None:
    conflicts = 0
    for i in range(count):
        while True:  # the optimistic pattern: read the position, write after it, or retry
            rec = await store.get_run(run_id)
            event = ModelCallFailed(
                turn_index=0, attempt=i + 1, code="rate_limited", message=f"{worker}:{i}"
            )
            try:
                await store.append(
                    run_id,
                    [event],
                    expected_seq=rec.last_seq,
                    epoch=rec.epoch,
                    status=rec.status,
                    now=time.time(),
                )
                break
            except Conflict:
                conflicts += 1
    done({"worker": worker, "conflicts": conflicts})


async def main(argv: list[str]) -> None:
    mode, url = argv[0], argv[1]
    if mode == "open":
        go, run_id = argv[2], argv[3]
        barrier(go)
        store = open_store(url)
        await store.create_run(created(run_id), now=time.time())
        await store.close()
        done({"created": run_id})
        return
    if mode == "commit":
        run_id, expected, epoch, status = argv[2], int(argv[3]), int(argv[4]), argv[5]
        events = from_wire(sys.stdin.read())
        store = open_store(url)
        print("appending", flush=True)
        seq = await store.append(
            run_id, events, expected_seq=expected, epoch=epoch, status=status, now=time.time()
        )
        await store.close()
        done({"seq": seq})
        return
    store = open_store(url)
    try:
        if mode == "claim":
            barrier(argv[2])
            await claim(store, argv[3], argv[4:])
        elif mode == "append":
            barrier(argv[2])
            await append(store, argv[3], argv[4], int(argv[5]))
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
