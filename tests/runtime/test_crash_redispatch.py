"""Redispatches under real crashes: the run owner is SIGKILLed before a redispatch,
after ``planned``, and after the executor accepted it (before ``dispatched``); each time a
fresh process takes the run over. The attempt planned once is offered again under the same
number (the budget is never spent twice for it), the effect runs once, and the run completes
with one result per call. With the in-process executor (the store executor comes with the
execution ledger)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from _crash_harness import KILLED, Scenario
from _scenario import RUN_ID, side_effects

from stead.core.events import EffectReconciled, Event, RedispatchRecorded, ToolResultRecorded
from stead.runtime import OwnedRun
from stead.store import SQLiteStore
from stead.testing import assert_valid_history

REDISPATCH = {"STEAD_TEST_RECOVERY": "redispatch"}


def _log(store: str) -> tuple[object, list[Event]]:
    async def load() -> tuple[object, list[Event]]:
        s = SQLiteStore(store)
        try:
            state, _ = await OwnedRun.load_state(s, RUN_ID)
            return state, [e.event for e in await s.read_events(RUN_ID)]
        finally:
            await s.close()

    return asyncio.run(load())


def _ledger(events: list[Event]) -> list[tuple[str, int]]:
    return [(e.step, e.attempt) for e in events if isinstance(e, RedispatchRecorded)]


@pytest.mark.parametrize(
    ("first", "tool"),
    [("after_intent#1", "lookup_order"), ("mid_model_call#2", None)],
    ids=["a read_only call in flight", "a model call in flight"],
)
def test_owner_killed_at_every_step_of_a_redispatch(
    scenario: Scenario, first: str, tool: str | None
) -> None:
    died = scenario.run("start", "reconcilable", crash=first)
    assert died.returncode == KILLED, died.stderr

    # Killed before the redispatch is planned: nothing in the ledger yet.
    died = scenario.run("run", "reconcilable", crash="before_redispatch", **REDISPATCH)
    assert died.returncode == KILLED, died.stderr
    assert _ledger(_log(scenario.store)[1]) == []

    # Killed after planned{1}: the attempt is owed.
    died = scenario.run("run", "reconcilable", crash="after_redispatch_planned", **REDISPATCH)
    assert died.returncode == KILLED, died.stderr
    assert _ledger(_log(scenario.store)[1]) == [("planned", 1)]

    # Killed after the executor accepted attempt 1, before dispatched{1}: still owed, and
    # offered again under the same number, not planned anew.
    died = scenario.run("run", "reconcilable", crash="after_redispatch_accepted", **REDISPATCH)
    assert died.returncode == KILLED, died.stderr
    assert _ledger(_log(scenario.store)[1]) == [("planned", 1)]

    done = scenario.run("run", "reconcilable", **REDISPATCH)
    assert done.returncode == 0, done.stderr
    assert done.out == {"status": "completed", "output": "Told on-call that order 42 shipped."}

    state, events = _log(scenario.store)
    assert_valid_history(state)  # type: ignore[arg-type]
    # One slot of the budget for three crashes, and the attempt reached the executor once.
    assert _ledger(events) == [("planned", 1), ("dispatched", 1)]
    verdicts = [(e.verdict, e.observed) for e in events if isinstance(e, EffectReconciled)]
    assert verdicts == [("redispatch", "missing")]
    results = Counter(
        (e.turn_index, e.tool_call_id) for e in events if isinstance(e, ToolResultRecorded)
    )
    assert set(results.values()) == {1}
    if tool is not None:  # the redispatched call ran once, in the last process
        assert side_effects().count(tool) == 1


def test_a_non_idempotent_call_is_never_redispatched_on_a_missing_that_proves_nothing(
    scenario: Scenario,
) -> None:
    """The in-process executor forgets what a dead process ran: its ``missing`` is no proof,
    so even under the redispatch policy a non_idempotent call in flight is disposed (its key
    aborted) and a person decides; it never runs twice."""
    died = scenario.run("start", "unreconcilable", crash="after_tool_effect:charge_card")
    assert died.returncode == KILLED, died.stderr
    rest = scenario.run("run", "unreconcilable", **REDISPATCH)
    assert rest.out is not None and rest.out["status"] == "awaiting_approval", rest.stderr
    _, events = _log(scenario.store)
    assert _ledger(events) == []
    (v,) = [e for e in events if isinstance(e, EffectReconciled)]
    assert (v.verdict, v.observed) == ("dispose", "aborted")
    assert side_effects().count("charge_card") == 1
