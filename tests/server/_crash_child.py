"""Drive one run with a short lease; armed with ``STEAD_CRASH_AT`` it is SIGKILLed midway.

python _crash_child.py STORE RUN_ID [AGENT]     (with AGENT: create the run first)
"""

from __future__ import annotations

import asyncio
import sys

from _agents import build

import stead


async def main(store: str, run_id: str, agent: str | None) -> None:
    async with stead.Runtime(store, agents=build(), lease_ttl=1.0) as rt:
        if agent is not None:
            await rt.start(agent, "Charge the order.", run_id=run_id)
        await rt.run(run_id)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
