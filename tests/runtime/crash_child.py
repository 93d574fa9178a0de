"""Child process for crash tests: start or continue the scenario run, print its status.

python crash_child.py STORE start|run|resume|decide KIND [decision [result]]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _scenario import RUN_ID, agent, steer_agent

import stead
from stead.core.reconcile import RecoveryPolicy


async def main(store: str, mode: str, kind: str, extra: list[str]) -> None:
    a = steer_agent(kind) if kind in ("approval", "cancel") else agent(kind)
    ttl = float(extra[0]) if mode == "contend" else 30.0
    async with stead.Runtime(store, agents=[a], lease_ttl=ttl) as rt:
        if os.environ.get("STEAD_TEST_RECOVERY") == "redispatch":
            rt.recovery = RecoveryPolicy(missing="redispatch")
        if mode == "contend":
            try:
                view = await rt.run(RUN_ID)
            except (stead.Conflict, stead.Fenced) as exc:
                print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
                sys.exit(3)
            print(json.dumps({"status": view.status.value, "output": view.output}))
            return
        if mode == "hold":
            # Drive until the run rests, say so, then wait to be killed.
            await rt.start(a, "Refund order 42", run_id=RUN_ID)
            view = await rt.run(RUN_ID)
            print(json.dumps({"status": view.status.value, "output": view.output}), flush=True)
            await asyncio.sleep(3600)
        if mode == "decide_only":
            pending = (await rt.get(RUN_ID)).approvals[0]
            edited = json.loads(extra[2]) if len(extra) > 2 else None
            await rt.decide(
                RUN_ID,
                pending.tool_call_id,
                extra[0],  # type: ignore[arg-type]
                token=pending.token,
                reason=extra[1] if len(extra) > 1 else "",
                arguments=edited,
                by="second-process",
            )
            view = await rt.run(RUN_ID)
            print(json.dumps({"status": view.status.value, "output": view.output}))
            return
        if mode == "start":
            await rt.start(a, "Tell on-call about order 42", run_id=RUN_ID)
            view = await rt.run(RUN_ID)
        elif mode == "decide":
            pending = (await rt.get(RUN_ID)).approvals[0]
            decision = extra[0]
            result = extra[1] if len(extra) > 1 else None
            await rt.decide(
                RUN_ID,
                pending.tool_call_id,
                decision,
                token=pending.token,  # type: ignore[arg-type]
                result=result,
                by="test",
            )
            view = await rt.run(RUN_ID)
        else:
            view = await (rt.resume(RUN_ID) if mode == "resume" else rt.run(RUN_ID))
        print(json.dumps({"status": view.status.value, "output": view.output}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
