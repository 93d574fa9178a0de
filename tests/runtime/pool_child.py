"""Child process: ``stead executor`` on the pool scenario's tools, with crash points.

python pool_child.py STORE_URL [LEASE_TTL]

``POOL_CRASH_AT`` = after_claim | after_start | before_settle SIGKILLs this process at that
point of the first effect (the Pool's hook). Serves queue ``pool`` until SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _pool_scenario import MODEL_QUEUE, QUEUE, agents

from stead.runtime.processes._pool import Pool, serve_pool


def hook(point: str, tool: str | None) -> None:
    if os.environ.get("POOL_CRASH_AT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


def main(url: str, ttl: float) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    limit = os.environ.get("POOL_MAX_CONCURRENT")
    queues = [MODEL_QUEUE] if limit else [QUEUE]
    pool = Pool(
        url, agents(), queues=queues, concurrency=4, lease_ttl=ttl, poll_interval=0.05,
        grace=2.0, hook=hook, max_concurrent=int(limit) if limit else None,
    )  # fmt: skip
    asyncio.run(serve_pool(pool))
    print(f"performed={pool.performed} refused={pool.refused}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 15.0)
