"""Child process for the lifecycle tests: fork, prune or import in a process a test may
SIGKILL at a crash point (STEAD_CRASH_AT), and print what it did as JSON.

python lifecycle_child.py STORE fork SOURCE TURN INPUT
python lifecycle_child.py STORE prune KEEP_SECONDS NOW
python lifecycle_child.py STORE import FILE
"""

from __future__ import annotations

import asyncio
import json
import sys

import stead
from stead.core.retention import Retention


async def main(store: str, mode: str, args: list[str]) -> None:
    clock = float(args[1]) if mode == "prune" else None
    options = {} if clock is None else {"clock": lambda: clock}
    async with stead.Runtime(store, **options) as rt:  # type: ignore[arg-type]
        if mode == "fork":
            view = await rt.fork(args[0], at_turn=int(args[1]), input=args[2])
            print(json.dumps({"run_id": view.run_id}))
        elif mode == "prune":
            policy = Retention(keep={"completed": float(args[0])}, batch=2)
            done = await rt.prune(policy, apply=True)
            print(json.dumps({"pruned": [r for r, _ in done.runs]}))
        elif mode == "import":
            done = await rt.import_runs(args[0], skip_existing=args[1:] == ["skip"])
            print(json.dumps({"runs": done.runs}))
        else:
            raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
