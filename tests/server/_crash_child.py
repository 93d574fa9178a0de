"""Drive one run with a short lease; armed with ``STEAD_CRASH_AT`` it is SIGKILLed midway."""

from __future__ import annotations

import asyncio
import sys

from _agents import build

import stead


async def main(store: str, run_id: str) -> None:
    async with stead.Runtime(store, agents=build(), lease_ttl=1.0) as rt:
        await rt.run(run_id)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
