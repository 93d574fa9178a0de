"""What an operator's screen asks of the runtime: runs found by a word of their input or
output (the search rows brought up to date first), a run as steps with its durations, and
whether resuming a run can succeed."""

from __future__ import annotations

from pathlib import Path

import pytest

import stead
from stead.store import RunQuery
from stead.testing import Reply, ScriptedModel

pytestmark = pytest.mark.timeout(60)


@stead.tool(effect="read_only")
def lookup(order_id: int) -> str:
    """Look an order up."""
    return f"order {order_id} shipped"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 0.5  # every reading half a second later: steps have durations
        return self.now


async def test_find_steps_and_resume(tmp_path: Path) -> None:
    clock = Clock()
    agent = stead.Agent(
        "shop",
        ScriptedModel(
            [
                Reply(text="Looking.", tool_calls=[("lookup", {"order_id": 7})]),
                "Order 7 went to Ingrid.",
            ]
            * 2
        ),
        [lookup],
    )
    # One input token is over this budget: its run fails before its first model call.
    thrifty = stead.Agent(
        "thrifty", ScriptedModel(["never"]), budget=stead.Budget(max_total_tokens=1)
    )
    async with stead.Runtime(
        f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent, thrifty], clock=clock
    ) as rt:
        first = await rt.start("shop", "Where is the parcel for Ingrid?")
        await rt.run(first)
        assert [r.run_id for r in await rt.find_runs(RunQuery(text="INGRID parcel"))] == [first]
        # A run that changed after its search row was written is found by its new text.
        second = await rt.start("shop", "And the blue one?")
        assert await rt.find_runs(RunQuery(text="ingrid")) != []
        await rt.run(second)
        found = {r.run_id for r in await rt.find_runs(RunQuery(text="went to ingrid"))}
        assert found == {first, second}
        assert await rt.update_search() == 0  # every row is up to date

        steps = await rt.steps(first)
        assert [t.turn_index for t in steps.turns] == [0, 1]
        (call,) = steps.turns[0].calls
        assert (call.name, call.kind, call.status, call.attempts) == ("lookup", "tool", "done", 1)
        assert call.ended_at is not None and call.ended_at > call.requested_at
        assert steps.turns[0].model_s is not None and steps.turns[0].model_s > 0
        assert steps.turns[1].text == "Order 7 went to Ingrid."
        assert steps.ended_at is not None and steps.waited_s == 0

        assert await rt.resume_refusal(first) == "it is completed"
        broke = await rt.start("thrifty", "Spend a lot.")
        view = await rt.run(broke)
        assert view.status == "failed" and (view.error or {})["code"] == "budget_exceeded"
        refusal = await rt.resume_refusal(broke)
        assert refusal is not None and "budget" in refusal
