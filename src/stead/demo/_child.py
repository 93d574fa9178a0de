"""The demo's worker process: drive one run, print one JSON line about how it ended."""

from __future__ import annotations

import asyncio
import json
import sys

import stead
from stead.demo._agent import build_agent


async def main(store: str, run_id: str) -> None:
    agent = build_agent()
    async with stead.Runtime(store, agents=[agent]) as rt:
        view = await rt.run(run_id)
        print(json.dumps({"status": view.status.value, "output": view.output}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
