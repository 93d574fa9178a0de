"""Child process of the concurrent-claims test: claim runs in small batches until none are left.

python _claim_child.py STORE_URL OWNER DIR NOW [NOW ...]

For each round k (one per NOW): write DIR/ready-k.OWNER, wait for DIR/go-k, claim until
nothing is left, write [[run_id, epoch, previous_owner], ...] to DIR/claims-k.OWNER.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path

from stead.store import open_store


async def main(url: str, owner: str, folder: Path, rounds: list[float]) -> None:
    store = open_store(url)
    try:
        await store.list_runs(limit=1)  # connect (and migrate) before the start line
        for k, now in enumerate(rounds, start=1):
            (folder / f"ready-{k}.{owner}").touch()
            while not (folder / f"go-{k}").exists():  # a busy start line
                time.sleep(0.001)  # noqa: ASYNC251
            claimed = []
            while True:
                got = await store.claim_next(
                    owner=owner, now=now, ttl=30.0, limit=random.randint(1, 3)
                )
                if not got:
                    break
                claimed += [[c.run_id, c.epoch, c.previous_owner] for c in got]
                await asyncio.sleep(0.005)  # a worker starts what it claimed, then claims more
            tmp = folder / f"claims-{k}.{owner}.tmp"
            tmp.write_text(json.dumps(claimed))
            tmp.replace(folder / f"claims-{k}.{owner}")  # whole, or not there
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), [float(a) for a in sys.argv[4:]]))
