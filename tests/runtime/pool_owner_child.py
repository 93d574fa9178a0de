"""Child process: the owner of a run whose tools go to an executor pool (queue ``pool``).

python pool_owner_child.py STORE_URL RUN_ID TOOL start|run

``start`` starts the run (the pool scenario's agent calling TOOL once) and drives it; ``run``
drives it on (a takeover when its last owner died). ``STEAD_CRASH_AT`` SIGKILLs this process
at a named point; ``STEAD_TEST_RECOVERY=redispatch`` sets ``RecoveryPolicy(missing=
"redispatch")``. Prints the run's status as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _pool_scenario import agent

import stead


async def main(url: str, run_id: str, tool: str, mode: str) -> None:
    a = agent(tool)
    recovery = (
        stead.RecoveryPolicy(missing="redispatch")
        if os.environ.get("STEAD_TEST_RECOVERY") == "redispatch"
        else None
    )
    async with stead.Runtime(url, agents=[a], recovery=recovery) as rt:
        if mode == "start":
            await rt.start(a, "go", run_id=run_id)
        view = await rt.run(run_id)
    print(json.dumps({"status": view.status.value}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
