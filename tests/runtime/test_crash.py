"""Guarantees 1-4 under real crashes: a child process is SIGKILLed at every named crash point
of a scenario with one tool of each effect class; a fresh process finishes the run.

After each: the run completes (or waits for a person where nothing can tell), read_only and
idempotent_write tools saw one idempotency key on every attempt, the non_idempotent message
was delivered exactly once, and every tool call in the history has exactly one result.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter

import pytest
from _crash_harness import KILLED, Scenario
from _scenario import RUN_ID, delivered, side_effects

from stead.core.canonical import idempotency_key
from stead.core.events import ToolReconciled, ToolResultRecorded
from stead.core.states import RunStatus
from stead.runtime import OwnedRun
from stead.store import SQLiteStore
from stead.testing import CRASH_POINTS, assert_valid_history

TOOLS = ("lookup_order", "upsert_ticket", "send_message")

CRASHES = [
    "mid_model_call#1",
    "mid_model_call#2",
    "mid_model_call#3",
    "after_intent#1",
    "after_intent#2",
    "after_tool_started:send_message",
    *[
        f"{p}:{t}"
        for p in ("after_tool_effect", "before_result_commit", "after_result_commit")
        for t in TOOLS
    ],
]

EFFECTS_CRASHES = [
    "after_intent#1",  # a read_only intent: held in memory in effects mode, lost
    "after_result_commit:lookup_order",  # a read_only result: held, lost, looked up again
    "after_tool_effect:upsert_ticket",  # an idempotent_write, its intent durable
    "before_result_commit:send_message",  # a non_idempotent result: durable in both modes
]
"""The points the crash suite also runs in the ``effects`` durability mode by default: kills
while that mode holds events in memory (the intent, a result), and the non_idempotent ones
it keeps durable. ``STEAD_TEST_ALL_MODES=1`` runs every point in both modes."""
ALL_MODES = os.environ.get("STEAD_TEST_ALL_MODES") == "1"
IN_BOTH = [
    *[(c, "strict") for c in CRASHES],
    *[(c, "effects") for c in (CRASHES if ALL_MODES else EFFECTS_CRASHES)],
]


@pytest.fixture
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The agents' durability mode in the child processes (``_scenario.durability``)."""
    value: str = getattr(request, "param", "strict")
    monkeypatch.setenv("STEAD_TEST_DURABILITY", value)
    return value


# A result lost with the process means the handler runs again on resume.
RERUN = {
    f"{p}:{t}"
    for p in ("after_tool_effect", "before_result_commit")
    for t in ("lookup_order", "upsert_ticket")
}
HELD = {
    "after_result_commit:lookup_order",  # held until the next turn's intent (an effect)
    "after_result_commit:upsert_ticket",  # held until send_message's result is written
}
HELD_TURN = "mid_model_call#2"
"""The second model call: lookup_order's result, held, is not written yet."""
"""In ``effects`` mode a read_only or idempotent_write result is held in memory until the next
commit that must be durable: a kill before that loses it too, and the handler runs again."""
UNORDERED = "mid_model_call#3"
"""In ``effects`` mode: upsert_ticket's result is lost here when it came in after
send_message's (nothing durable followed it), not when it came first: both may happen."""


def _final(store: str) -> tuple[object, list[object]]:
    async def load() -> tuple[object, list[object]]:
        s = SQLiteStore(store)
        try:
            state, _ = await OwnedRun.load_state(s, RUN_ID)
            events = [e.event for e in await s.read_events(RUN_ID)]
            return state, events
        finally:
            await s.close()

    return asyncio.run(load())


def test_every_named_point_is_exercised() -> None:
    named = {c.split(":")[0].split("#")[0] for c in CRASHES}
    assert named >= {
        "mid_model_call",
        "after_intent",
        "after_tool_started",
        "after_tool_effect",
        "before_result_commit",
        "after_result_commit",
    }
    assert named <= set(CRASH_POINTS)


@pytest.mark.parametrize(("crash", "mode"), IN_BOTH, indirect=["mode"])
def test_crash_then_resume_in_new_process(scenario: Scenario, crash: str, mode: str) -> None:
    first = scenario.run("start", "reconcilable", crash=crash)
    assert first.returncode == KILLED, f"crash point {crash} never fired: {first.stderr}"

    second = scenario.run("run", "reconcilable")
    assert second.returncode == 0, second.stderr
    assert second.out == {"status": "completed", "output": "Told on-call that order 42 shipped."}

    state, events = _final(scenario.store)
    assert state.status is RunStatus.COMPLETED  # type: ignore[attr-defined]
    assert_valid_history(state)  # type: ignore[arg-type]

    # Exactly one result per call in the log (Guarantee 2, and the store's unique index).
    results = Counter(
        (e.turn_index, e.tool_call_id) for e in events if isinstance(e, ToolResultRecorded)
    )
    assert results and set(results.values()) == {1}

    # Non-idempotent: delivered exactly once, whatever the crash point.
    assert len(delivered()) == 1
    send_key = idempotency_key(RUN_ID, "call_1_1")
    assert delivered(send_key) != []

    # read_only / idempotent_write: same key on every attempt; rerun only if a result was lost.
    led = side_effects()
    assert set(led.keys("lookup_order")) == {idempotency_key(RUN_ID, "call_0_0")}
    assert set(led.keys("upsert_ticket")) == {idempotency_key(RUN_ID, "call_1_0")}
    rerun = RERUN | HELD if mode == "effects" else RERUN
    lookup_lost = (crash in rerun and "lookup" in crash) or (mode, crash) == ("effects", HELD_TURN)
    assert led.count("lookup_order") == (2 if lookup_lost else 1)
    if crash in rerun and "upsert" in crash:
        assert led.count("upsert_ticket") == 2
    elif "send_message" not in crash and (mode, crash) != ("effects", UNORDERED):
        assert led.count("upsert_ticket") == 1
    else:  # upsert ran in parallel with send: it may have finished before the kill or not
        assert led.count("upsert_ticket") in (1, 2)


def test_no_crash_baseline(scenario: Scenario) -> None:
    child = scenario.run("start", "reconcilable")
    assert child.returncode == 0, child.stderr
    assert len(delivered()) == 1
    led = side_effects()
    assert (led.count("lookup_order"), led.count("upsert_ticket")) == (1, 1)


# -- a non_idempotent tool nothing can reconcile: a person decides ----------------------------


@pytest.mark.parametrize(
    ("crash", "decision", "charges", "mode"),
    [
        # Killed after the start was recorded, before the handler ran: truthfully "not
        # happened", so it runs once now.
        ("after_tool_started:charge_card", "not_happened", 1, "strict"),
        # Killed after the charge, before its result was durable: "happened".
        ("after_tool_effect:charge_card", "happened", 1, "strict"),
        ("after_tool_effect:charge_card", "happened", 1, "effects"),
        ("before_result_commit:charge_card", "happened", 1, "strict"),
    ],
    indirect=["mode"],
)
def test_unknown_outcome_waits_for_a_person(
    scenario: Scenario, crash: str, decision: str, charges: int, mode: str
) -> None:
    first = scenario.run("start", "unreconcilable", crash=crash)
    assert first.returncode == KILLED, first.stderr

    second = scenario.run("run", "unreconcilable")
    assert second.returncode == 0, second.stderr
    assert second.out is not None and second.out["status"] == "awaiting_approval"
    state, _ = _final(scenario.store)
    (pending,) = state.approvals.values()  # type: ignore[attr-defined]
    assert pending.reason == "outcome_unknown"
    assert pending.payload["tool"] == "charge_card"
    # Nothing ran again automatically.
    before = side_effects().count("charge_card")

    third = scenario.run("decide", "unreconcilable", decision, '{"charged": 500}')
    assert third.returncode == 0, third.stderr
    assert third.out == {"status": "completed", "output": "Charged 5.00."}
    assert side_effects().count("charge_card") == charges
    assert before <= charges
    state, _ = _final(scenario.store)
    assert_valid_history(state)  # type: ignore[arg-type]


@pytest.mark.parametrize("crash", ["after_intent#1", "after_result_commit:charge_card"])
def test_unreconcilable_without_ambiguity_needs_no_person(scenario: Scenario, crash: str) -> None:
    first = scenario.run("start", "unreconcilable", crash=crash)
    assert first.returncode == KILLED, first.stderr
    second = scenario.run("run", "unreconcilable")
    assert second.out == {"status": "completed", "output": "Charged 5.00."}, second.stderr
    assert side_effects().count("charge_card") == 1


def test_start_record_rides_with_the_intent_and_a_crash_there_is_reconciled(
    scenario: Scenario,
) -> None:
    """send_message has a reconcile function, so its start record is committed with the
    intent (one fsync fewer per call). Killed right after that commit, the call is in flight
    though its handler never ran: the next process asks reconcile, which says not done, and
    runs it once. No person is asked."""
    first = scenario.run("start", "reconcilable", crash="after_intent#2")
    assert first.returncode == KILLED, first.stderr
    _, events = _final(scenario.store)
    tail = [type(e).__name__ for e in events[-4:]]
    assert tail == [
        "AssistantMessageRecorded",
        "ToolCallRequested",
        "ToolCallRequested",
        "ToolCallStarted",
    ]
    assert events[-1].tool_call_id == "call_1_1"  # type: ignore[attr-defined]
    assert delivered() == []  # durable "started", yet the handler never ran

    second = scenario.run("run", "reconcilable")
    assert second.out == {"status": "completed", "output": "Told on-call that order 42 shipped."}
    _, events = _final(scenario.store)
    verdicts = [e.verdict for e in events if isinstance(e, ToolReconciled)]
    assert verdicts == ["not_done"]
    assert len(delivered()) == 1
