"""The reconciler at a takeover, acting (``stead.runtime.loop._reconcile``), every disposition:
a run is left mid-way by an owner that dies (a crash hook that raises out of the drive), and
a second Runtime takes it over with a real executor whose view of the keys a test sets (what
an out-of-process pool would hold: active, orphaned, terminal, an acceptance that wins the
race with an abort, a dispatch whose answer is lost). After each: what the log says (the
verdict lines of the timeline), what the executor was asked, what ran, and that the run
finishes with one result per call."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import stead
from stead._signal import AbortSignal
from stead.cli._render import describe
from stead.core.canonical import effect_id
from stead.core.effects import Assignment, AssignmentKey, Outcome, ToolSucceeded
from stead.core.events import (
    EffectReconciled,
    Event,
    ModelCallFailed,
    RedispatchRecorded,
    StepFailed,
    ToolResultRecorded,
)
from stead.core.progress import ProgressSink
from stead.core.reconcile import RecoveryPolicy
from stead.core.states import RunStatus
from stead.errors import DispatchRejected
from stead.runtime import InProcessExecutor, Runtime
from stead.store import Claim
from stead.testing import Reply, ScriptedModel, assert_valid_history

ran: list[str] = []


@stead.tool(effect="read_only")
def peek(what: str) -> str:
    """Look at something."""
    ran.append("peek")
    return f"saw {what}"


@stead.tool(effect="non_idempotent")
def charge(cents: int) -> str:
    """Charge a card; nothing can tell afterwards whether it happened."""
    ran.append("charge")
    return f"charged {cents}"


class Die(BaseException):
    """The first owner's death: raised out of its drive at a crash point."""


class Pool(InProcessExecutor):
    """The in-process executor, answering for the keys a test names what a pool holds."""

    def __init__(self, agent: stead.Agent, sink: ProgressSink | None) -> None:
        super().__init__(agent.model, agent.registry, sink)
        self.answers: dict[str, list[str]] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.accepted_first: set[str] = set()
        self.lose: int = 0
        self.reject: DispatchRejected | Exception | None = None
        self.authoritative = False
        self.asked: list[tuple[str, str]] = []

    def attach(self, key: AssignmentKey) -> Any:
        left = self.answers.get(key.effect_id)
        if left:
            return left.pop(0) if len(left) > 1 else left[0]
        return super().attach(key)

    async def abort(self, key: AssignmentKey) -> bool:
        self.asked.append(("abort", key.effect_id))
        if key.effect_id in self.accepted_first:
            return False
        return await super().abort(key)

    async def outcome(self, key: AssignmentKey) -> Outcome:
        if key.effect_id in self.outcomes:
            return self.outcomes[key.effect_id]
        return await super().outcome(key)

    async def recover(self, key: AssignmentKey) -> None:
        self.asked.append(("recover", key.effect_id))
        if self.answers.get(key.effect_id) == ["orphaned", "terminal"]:
            self.answers[key.effect_id] = ["terminal"]

    async def cancel(self, key: AssignmentKey, reason: str) -> None:
        self.asked.append(("cancel", key.effect_id))
        await super().cancel(key, reason)

    async def dispatch(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> bool:
        self.asked.append(("dispatch", assignment.key.effect_id))
        if self.lose:
            self.lose -= 1
            raise ConnectionError("the answer to the dispatch was lost")
        if self.reject is not None:
            rejection, self.reject = self.reject, None
            raise rejection
        return await super().dispatch(assignment, signal=signal, local=local)


@pytest.fixture
def store(tmp_path: Path) -> str:
    ran.clear()
    return str(tmp_path / "runs.db")


def _die_at(point: str) -> Any:
    def hook(p: str, tool: str | None) -> None:
        if p == point:
            raise Die(p)

    return hook


async def _left_mid_way(store: str, agent: stead.Agent, point: str = "after_intent") -> str:
    async with Runtime(store, agents=[agent], crash=_die_at(point)) as rt:
        rid = await rt.start(agent, "go")
        with pytest.raises(Die):
            await rt.run(rid)
    ran.clear()
    return rid


async def _take_over(
    store: str,
    agent: stead.Agent,
    rid: str,
    setup: Any = None,
    recovery: RecoveryPolicy | None = None,
) -> tuple[stead.RunView, list[Event], Pool]:
    pools: list[Pool] = []

    def factory(a: stead.Agent, sink: ProgressSink | None) -> Pool:
        pool = Pool(a, sink)
        if setup is not None:
            setup(pool)
        pools.append(pool)
        return pool

    async with Runtime(store, agents=[agent], executor_factory=factory) as rt:
        if recovery is not None:
            rt.recovery = recovery
        epoch = await rt.store.claim(rid, owner=rt.owner, now=time.time(), ttl=30)
        claim = Claim(
            run_id=rid, agent=agent.name, status="running", epoch=epoch, previous_owner="dead"
        )
        view = await rt.run(rid, claim=claim)
        events = [s.event for s in await rt.store.read_events(rid)]
        assert_valid_history(await _state(rt, rid))
    results = Counter(e.tool_call_id for e in events if isinstance(e, ToolResultRecorded))
    assert set(results.values()) <= {1}
    return view, events, pools[0]


async def _state(rt: Runtime, rid: str) -> Any:
    from stead.runtime import OwnedRun

    state, _ = await OwnedRun.load_state(rt.store, rid)
    return state


def _verdicts(events: list[Event]) -> list[tuple[str, str, str]]:
    return [
        (e.tool_call_id or "model", e.verdict, e.observed)
        for e in events
        if isinstance(e, EffectReconciled)
    ]


def _key(rid: str, call: str, attempt: int = 1) -> str:
    return effect_id(rid, 0, call, attempt)


def _agent(*calls: tuple[str, dict[str, Any]], name: str = "recon") -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=list(calls)), "done"])
    return stead.Agent(name, model, [peek, charge])


async def test_dispose_is_the_default_and_the_key_is_aborted_first(store: str) -> None:
    agent = _agent(("peek", {"what": "x"}))
    rid = await _left_mid_way(store, agent)
    view, events, pool = await _take_over(store, agent, rid)
    assert view.status is RunStatus.COMPLETED
    key = _key(rid, "call_0_0")
    assert _verdicts(events) == [("call_0_0", "dispose", "aborted")]
    assert pool.asked == [("abort", key)]
    assert pool.attach(AssignmentKey(session_id="", run_id=rid, effect_id=key)) == "aborted"
    # settled effect_unknown, then read_only reruns under a new key: once
    assert ran == ["peek"]
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert result.attempt == 2
    # the timeline has a line for the verdict, in words and with its name
    (line,) = [describe(e) for e in events if isinstance(e, EffectReconciled)]
    assert line[0] == "recovery" and "[dispose: aborted" in line[1]


async def test_an_acceptance_that_won_the_race_with_the_abort_is_kept(store: str) -> None:
    agent = _agent(("peek", {"what": "x"}))
    rid = await _left_mid_way(store, agent)
    key = _key(rid, "call_0_0")

    def setup(pool: Pool) -> None:
        pool.accepted_first.add(key)
        pool.outcomes[key] = ToolSucceeded(content="seen by the pool")

    view, events, _ = await _take_over(store, agent, rid, setup)
    assert view.status is RunStatus.COMPLETED
    assert _verdicts(events) == [("call_0_0", "keep", "active")]
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert (result.content, result.attempt) == ("seen by the pool", 1)
    assert ran == []  # its outcome was recorded, nothing ran again


@pytest.mark.parametrize("observed", ["active", "terminal"])
async def test_a_running_or_settled_effect_is_kept_and_its_outcome_recorded(
    store: str, observed: str
) -> None:
    agent = _agent(("charge", {"cents": 5}))
    rid = await _left_mid_way(store, agent, "after_tool_started")
    key = _key(rid, "call_0_0")

    def setup(pool: Pool) -> None:
        pool.answers[key] = [observed]
        pool.outcomes[key] = ToolSucceeded(content="charged 5, by the pool")

    view, events, pool = await _take_over(store, agent, rid, setup)
    assert view.status is RunStatus.COMPLETED  # no person asked, nothing reconciled
    assert _verdicts(events) == [("call_0_0", "keep", observed)]
    assert pool.asked == []
    assert ran == []


async def test_an_orphan_is_deferred_and_recovered_then_kept(store: str) -> None:
    agent = _agent(("charge", {"cents": 5}))
    rid = await _left_mid_way(store, agent, "after_tool_started")
    key = _key(rid, "call_0_0")

    def setup(pool: Pool) -> None:
        pool.answers[key] = ["orphaned", "terminal"]
        pool.outcomes[key] = ToolSucceeded(content="charged 5, recovered")

    recovery = RecoveryPolicy(defer_wait=0.01)
    view, events, pool = await _take_over(store, agent, rid, setup, recovery)
    assert view.status is RunStatus.COMPLETED
    assert _verdicts(events) == [
        ("call_0_0", "defer", "orphaned"),
        ("call_0_0", "keep", "terminal"),
    ]
    assert pool.asked == [("recover", key)]  # asked once, never disposed on sight
    assert ran == []


async def test_an_orphan_past_its_bound_counts_as_missing(store: str) -> None:
    """The seed leaves a deferral unbounded; here the ``max_deferrals``-th look counts it as
    missing: its accepted key cannot be aborted, so it is cancelled, then disposed, and a
    non_idempotent call without a reconcile function goes to a person."""
    agent = _agent(("charge", {"cents": 5}))
    rid = await _left_mid_way(store, agent, "after_tool_started")
    key = _key(rid, "call_0_0")

    def setup(pool: Pool) -> None:
        pool.answers[key] = ["orphaned"]

    recovery = RecoveryPolicy(defer_wait=0.01, max_deferrals=2)
    view, events, pool = await _take_over(store, agent, rid, setup, recovery)
    assert view.status is RunStatus.AWAITING_APPROVAL
    assert _verdicts(events) == [
        ("call_0_0", "defer", "orphaned"),
        ("call_0_0", "defer", "orphaned"),
        ("call_0_0", "dispose", "orphaned"),
    ]
    assert pool.asked == [("recover", key), ("recover", key), ("cancel", key)]
    assert ran == []
    assert view.approvals[0].reason == "outcome_unknown"


async def test_redispatch_when_the_policy_says_so(store: str) -> None:
    agent = _agent(("peek", {"what": "x"}))
    rid = await _left_mid_way(store, agent)
    key = _key(rid, "call_0_0")
    recovery = RecoveryPolicy(missing="redispatch")
    view, events, pool = await _take_over(store, agent, rid, recovery=recovery)
    assert view.status is RunStatus.COMPLETED
    ledger = [(e.step, e.attempt) for e in events if isinstance(e, RedispatchRecorded)]
    assert ledger == [("planned", 1), ("dispatched", 1)]
    assert _verdicts(events) == [("call_0_0", "redispatch", "missing")]
    assert pool.asked == [("dispatch", key)]
    assert ran == ["peek"]  # the redispatched effect ran once, and its outcome was recorded
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert result.attempt == 1


async def test_a_lost_dispatch_answer_leaves_the_attempt_owed(store: str) -> None:
    agent = _agent(("peek", {"what": "x"}))
    rid = await _left_mid_way(store, agent)
    key = _key(rid, "call_0_0")

    def setup(pool: Pool) -> None:
        pool.lose = 1

    recovery = RecoveryPolicy(missing="redispatch", defer_wait=0.01)
    view, events, pool = await _take_over(store, agent, rid, setup, recovery)
    assert view.status is RunStatus.COMPLETED
    ledger = [(e.step, e.attempt) for e in events if isinstance(e, RedispatchRecorded)]
    assert ledger == [("planned", 1), ("dispatched", 1)]  # offered again, not planned anew
    assert _verdicts(events) == [
        ("call_0_0", "defer", "missing"),
        ("call_0_0", "redispatch", "missing"),
    ]
    assert pool.asked == [("dispatch", key), ("dispatch", key)]
    assert ran == ["peek"]


async def test_a_spent_budget_gives_up_and_disposes(store: str) -> None:
    agent = _agent(("peek", {"what": "x"}))
    rid = await _left_mid_way(store, agent)
    key = _key(rid, "call_0_0")
    recovery = RecoveryPolicy(missing="redispatch", max_redispatches=0)
    view, events, pool = await _take_over(store, agent, rid, recovery=recovery)
    assert view.status is RunStatus.COMPLETED
    (gave_up,) = [e for e in events if isinstance(e, RedispatchRecorded)]
    assert gave_up.step == "given_up" and "budget of 0" in gave_up.reason
    assert _verdicts(events) == [("call_0_0", "dispose", "aborted")]
    assert pool.asked == [("abort", key)]


async def test_a_missing_non_idempotent_call_is_redispatched_only_where_missing_is_proof(
    store: str,
) -> None:
    agent = _agent(("charge", {"cents": 5}))
    rid = await _left_mid_way(store, agent, "after_tool_started")

    def durable(pool: Pool) -> None:
        pool.authoritative = True  # a ledger that proves the key never ran

    recovery = RecoveryPolicy(missing="redispatch")
    view, events, _ = await _take_over(store, agent, rid, durable, recovery)
    assert view.status is RunStatus.COMPLETED
    assert _verdicts(events) == [("call_0_0", "redispatch", "missing")]
    assert ran == ["charge"]


async def test_disposing_the_model_call_plans_the_turn_again(store: str) -> None:
    calls: list[int] = []

    def first(_: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise Die("mid model call")
        return "answered"

    agent = stead.Agent("recon-model", ScriptedModel([first, first]), [peek])
    async with Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "go")
        with pytest.raises(Die):
            await rt.run(rid)
    view, events, pool = await _take_over(store, agent, rid)
    assert view.status is RunStatus.COMPLETED and view.output == "answered"
    assert _verdicts(events) == [("model", "dispose", "aborted")]
    assert not [e for e in events if isinstance(e, ModelCallFailed)]  # lost, not failed
    (verdict,) = [e for e in events if isinstance(e, EffectReconciled)]
    assert (verdict.attempt, verdict.effect_id) == (1, effect_id(rid, 0, "model", 1))
    assert pool.asked == [("abort", effect_id(rid, 0, "model", 1))]
    assert len(calls) == 2


async def test_an_executor_that_cannot_be_asked_is_a_failed_step_not_a_stuck_run(
    store: str,
) -> None:
    agent = _agent(("peek", {"what": "x"}))
    rid = await _left_mid_way(store, agent)

    def unreachable(pool: Pool) -> None:
        def attach(key: AssignmentKey) -> Any:
            raise ConnectionError("the pool is unreachable")

        pool.attach = attach  # type: ignore[method-assign]

    view, events, _ = await _take_over(store, agent, rid, unreachable)
    assert view.status is RunStatus.COMPLETED
    (failed,) = [e for e in events if isinstance(e, StepFailed)]
    assert failed.step == "reconcile" and failed.error_type == "ConnectionError"
    assert _verdicts(events) == []
    assert ran == ["peek"]


async def test_the_policy_is_a_runtime_option_and_a_wrong_one_a_user_error(store: str) -> None:
    with pytest.raises(stead.UserError, match="RecoveryPolicy"):
        Runtime(store, recovery="redispatch")  # type: ignore[arg-type]
    policy = stead.RecoveryPolicy(missing="redispatch", max_redispatches=1)
    async with Runtime(store, recovery=policy) as rt:
        assert rt.recovery is policy
    worker = stead.runtime.Worker(store, [], recovery=policy)
    try:
        assert worker.runtime.recovery is policy
    finally:
        await worker.close()
    async with Runtime(store) as rt:
        assert rt.recovery == stead.RecoveryPolicy()  # dispose, 3 redispatches, 3 deferrals
        assert (rt.recovery.missing, rt.recovery.max_redispatches) == ("dispose", 3)


async def test_a_kept_effect_of_a_run_asked_to_cancel_is_stopped_not_awaited(store: str) -> None:
    from stead.core.builders import cancel_request_event

    agent = _agent(("charge", {"cents": 5}))
    rid = await _left_mid_way(store, agent, "after_tool_started")
    async with Runtime(store, agents=[agent]) as rt:
        await rt._append_external(rid, lambda s: [cancel_request_event("stop", "test")])
    key = _key(rid, "call_0_0")

    def setup(pool: Pool) -> None:
        pool.answers[key] = ["active"]  # and it never settles: its outcome is never asked

    view, events, pool = await _take_over(store, agent, rid, setup)
    assert view.status is RunStatus.CANCELLED
    assert _verdicts(events) == [("call_0_0", "keep", "active")]
    assert pool.asked == [("cancel", key)]
    (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert result.source == "cancelled"


async def test_a_rejected_dispatch_gives_up_at_once_with_the_rejections_text(store: str) -> None:
    """An executor that refuses the assignment for good would refuse every attempt: the
    redispatch gives up at once, the executor's words its reason, and the budget is not
    spent on offering it again and again."""
    agent = _agent(("peek", {"what": "x"}))
    rid = await _left_mid_way(store, agent)
    key = _key(rid, "call_0_0")
    why = "executor e1: tool 'peek' is defined here with digest 0a1b2c, not 9f8e7d"

    def setup(pool: Pool) -> None:
        pool.reject = DispatchRejected(why)

    recovery = RecoveryPolicy(missing="redispatch", max_redispatches=5, defer_wait=0.01)
    view, events, pool = await _take_over(store, agent, rid, setup, recovery)
    assert view.status is RunStatus.COMPLETED
    ledger = [(e.step, e.attempt, e.reason) for e in events if isinstance(e, RedispatchRecorded)]
    assert ledger == [("planned", 1, ""), ("given_up", 0, why)]
    assert pool.asked == [("dispatch", key), ("abort", key)]  # offered once, then disposed
    assert _verdicts(events) == [("call_0_0", "dispose", "aborted")]
    assert ran == ["peek"]  # settled effect_unknown, then read_only runs under a new key


@pytest.mark.parametrize(
    "error",
    [
        DispatchRejected("executor e1 is starting", retryable=True),
        RuntimeError("something nobody classified"),
    ],
    ids=["retryable", "unknown"],
)
async def test_retryable_and_unknown_dispatch_errors_still_defer(
    store: str, error: Exception
) -> None:
    agent = _agent(("peek", {"what": "x"}))
    rid = await _left_mid_way(store, agent)
    key = _key(rid, "call_0_0")

    def setup(pool: Pool) -> None:
        pool.reject = error

    recovery = RecoveryPolicy(missing="redispatch", defer_wait=0.01)
    view, events, pool = await _take_over(store, agent, rid, setup, recovery)
    assert view.status is RunStatus.COMPLETED
    ledger = [(e.step, e.attempt) for e in events if isinstance(e, RedispatchRecorded)]
    assert ledger == [("planned", 1), ("dispatched", 1)]  # owed, offered again, accepted
    assert pool.asked == [("dispatch", key), ("dispatch", key)]
    assert ran == ["peek"]
