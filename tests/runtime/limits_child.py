"""Child process for the cross-process tests of questions and limits: a question, a tool that
blocks, a deadline.

python limits_child.py STORE MODE KIND [ARG]

KIND ``ask``: a run that asks its user which shipping speed (a pydantic answer); ``slow``: a
run whose one tool blocks (it writes ``$STEAD_TEST_MARK`` first, and counts its runs there);
``flaky``: a retried tool whose attempt 1 fails and whose attempt 2 SIGKILLs its process once.
``$STEAD_TEST_MAX_DURATION`` and ``$STEAD_TEST_WAIT_COUNTS`` (0/1) set the run's deadline;
``$STEAD_TEST_CLOCK_AHEAD`` moves this process's clock ahead by that many seconds (days later,
without waiting days). Prints one JSON line: status, output, error.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Literal

import pydantic

import stead
from stead.providers import ModelRequest
from stead.runtime import Backoff
from stead.testing import Reply, ScriptedModel

RUN_ID = "run_limits"


class Shipping(pydantic.BaseModel):
    speed: Literal["standard", "express"]
    gift_wrap: bool = False


def _last_result(request: ModelRequest) -> str:
    from stead.core.messages import ToolResultMessage

    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    return results[-1].content if results else "nothing"


@stead.tool(effect="idempotent_write")
async def block(ctx: stead.ToolContext) -> str:
    """Work that takes a long time."""
    mark = Path(os.environ["STEAD_TEST_MARK"])
    mark.write_text(mark.read_text() + f"{ctx.attempt}\n" if mark.exists() else "1\n")  # noqa: ASYNC240
    await asyncio.sleep(3600)
    return "finished"


@stead.tool(effect="read_only", retries=3)
def flaky(ctx: stead.ToolContext) -> str:
    """Fails on attempt 1; attempt 2 kills its own process the first time."""
    mark = Path(os.environ["STEAD_TEST_MARK"])
    if ctx.attempt == 1:
        raise ConnectionError("the service is down")
    if not mark.exists():
        mark.write_text(str(ctx.attempt))
        os.kill(os.getpid(), signal.SIGKILL)
    return f"ok on attempt {ctx.attempt}"


def agent(kind: str) -> stead.Agent:
    raw = os.environ.get("STEAD_TEST_MAX_DURATION")
    limits = stead.Limits(
        max_duration=float(raw) if raw else None,
        duration_counts_waiting=os.environ.get("STEAD_TEST_WAIT_COUNTS", "1") == "1",
    )
    if kind == "ask":
        model = ScriptedModel(
            [
                Reply(tool_calls=[("ask_user", {"question": "Express or standard shipping?"})]),
                lambda request: f"Shipping chosen: {_last_result(request)}",
            ]
        )
        return stead.Agent("limits-ask", model, [stead.question_tool(Shipping)], limits=limits)
    if kind == "flaky":
        model = ScriptedModel([Reply(tool_calls=[("flaky", {})]), "done"])
        return stead.Agent("limits-flaky", model, [flaky], limits=limits)
    model = ScriptedModel([Reply(tool_calls=[("block", {})]), "done"])
    return stead.Agent("limits-slow", model, [block], limits=limits)


def _print(view: stead.RunView) -> None:
    out: dict[str, Any] = {"status": view.status.value, "output": view.output, "error": view.error}
    print(json.dumps(out), flush=True)


async def main(store: str, mode: str, kind: str, extra: list[str]) -> None:
    ahead = float(os.environ.get("STEAD_TEST_CLOCK_AHEAD", "0"))
    a = agent(kind)
    fast = Backoff(base=0.001, cap=0.002)
    async with stead.Runtime(
        store, agents=[a], clock=lambda: time.time() + ahead, backoff=fast
    ) as rt:
        if mode == "start":  # drive until the run rests (or is killed in its tool)
            await rt.start(a, "Ship my order", run_id=RUN_ID)
            _print(await rt.run(RUN_ID))
            await asyncio.sleep(3600)  # hold on, to be killed
        elif mode == "answer":
            pending = (await rt.get(RUN_ID)).approvals[0]
            await rt.answer(RUN_ID, pending.tool_call_id, json.loads(extra[0]), by="second")
            _print(await rt.run(RUN_ID))
        elif mode == "sweep":
            await rt.expire_approvals()
            _print(await rt.get(RUN_ID))
        else:  # run
            _print(await rt.run(RUN_ID))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
