"""The reconciler's decisions (``stead.core.reconcile``): the verdict table case by case, the
fold of a key's redispatches, which effects a takeover looks at, what a disposal records, and the
same rules by property (hypothesis): never a disposal of what runs, never a redispatch past
the budget or of a non_idempotent call on an executor whose ``missing`` proves nothing, and a
crash anywhere in a redispatch never spends a second slot for one attempt."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from core_strategies import (
    AWAITING_TWO,
    COMPLETED,
    NI_STARTED,
    POLICY_WAIT,
    RUN_ID,
    RUNNING_T0,
    reply,
    request,
    run_logs,
    start,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.core.canonical import effect_id
from stead.core.decide import ToolSpec, next_step, plan_call
from stead.core.events import (
    ApprovalDecided,
    EffectReconciled,
    Event,
    ModelCallFailed,
    RedispatchRecorded,
    RunRecovered,
    ToolCallRequested,
    ToolOutcomeUnknown,
)
from stead.core.fold import RunState, apply, fold
from stead.core.reconcile import (
    ATTACHMENTS,
    VERDICTS,
    Decision,
    RecoveryPolicy,
    RedispatchConflict,
    Redispatches,
    Target,
    after_abort,
    after_dispatch,
    decide,
    redispatch_event,
    redispatch_step,
    remember,
    targets,
    verdict_event,
)
from stead.errors import UserError

DISPOSE = RecoveryPolicy()
REDISPATCH = RecoveryPolicy(missing="redispatch", max_redispatches=2, max_deferrals=2)


def tool(cls: Any = "read_only", attempt: int = 1) -> Target:
    return Target(
        turn_index=0,
        tool_call_id="a",
        attempt=attempt,
        effect_id=effect_id(RUN_ID, 0, "a", attempt),
        effect_class=cls,
    )


MODEL = Target(
    turn_index=0,
    tool_call_id="",
    attempt=1,
    effect_id=effect_id(RUN_ID, 0, "model", 1),
    effect_class=None,
)

# -- the verdict table, case by case -------------------------------------------------------

# (name, target, observed, policy, redispatches, deferrals, authoritative, action, attempt)
TABLE: list[tuple[str, Target, Any, RecoveryPolicy, Redispatches, int, bool, str, int]] = [
    ("active: keep", tool(), "active", DISPOSE, Redispatches(), 0, False, "wait", 0),
    (
        "terminal: keep, its outcome recorded",
        MODEL,
        "terminal",
        DISPOSE,
        Redispatches(),
        0,
        False,
        "wait",
        0,
    ),
    (
        "active under redispatch: keep",
        tool(),
        "active",
        REDISPATCH,
        Redispatches(),
        0,
        True,
        "wait",
        0,
    ),
    (
        "orphaned: defer, recover once",
        tool(),
        "orphaned",
        DISPOSE,
        Redispatches(),
        0,
        True,
        "recover",
        0,
    ),
    (
        "orphaned below the bound",
        tool(),
        "orphaned",
        REDISPATCH,
        Redispatches(),
        1,
        True,
        "recover",
        0,
    ),
    (
        "orphaned at the bound: counts as missing",
        tool(),
        "orphaned",
        REDISPATCH,
        Redispatches(),
        2,
        True,
        "cancel",
        0,
    ),
    (
        "aborted: dispose, nothing to abort",
        tool(),
        "aborted",
        DISPOSE,
        Redispatches(),
        0,
        True,
        "dispose",
        0,
    ),
    (
        "aborted under redispatch: dispose",
        MODEL,
        "aborted",
        REDISPATCH,
        Redispatches(),
        0,
        True,
        "dispose",
        0,
    ),
    (
        "missing: abort, then dispose",
        MODEL,
        "missing",
        DISPOSE,
        Redispatches(),
        0,
        True,
        "abort",
        0,
    ),
    (
        "missing, ports alone never redispatch",
        tool(),
        "missing",
        DISPOSE,
        Redispatches(planned=1),
        0,
        True,
        "abort",
        0,
    ),
    (
        "missing: first redispatch",
        MODEL,
        "missing",
        REDISPATCH,
        Redispatches(),
        0,
        False,
        "plan",
        1,
    ),
    (
        "missing: second redispatch",
        tool(),
        "missing",
        REDISPATCH,
        Redispatches(1, 1),
        0,
        False,
        "plan",
        2,
    ),
    (
        "budget spent: give up",
        tool(),
        "missing",
        REDISPATCH,
        Redispatches(2, 2),
        0,
        False,
        "give_up",
        0,
    ),
    (
        "owed attempt: offered again, no new slot",
        tool(),
        "missing",
        REDISPATCH,
        Redispatches(1, 0),
        0,
        False,
        "offer",
        1,
    ),
    (
        "owed attempt at the budget is still offered",
        tool(),
        "missing",
        REDISPATCH,
        Redispatches(2, 1),
        0,
        False,
        "offer",
        2,
    ),
    (
        "owed attempt lost too often: give up",
        tool(),
        "missing",
        REDISPATCH,
        Redispatches(1, 0),
        2,
        False,
        "give_up",
        0,
    ),
    (
        "already given up: abort",
        tool(),
        "missing",
        REDISPATCH,
        Redispatches(1, 1, True, "x"),
        0,
        True,
        "abort",
        0,
    ),
    (
        "non_idempotent, missing proves nothing: abort",
        tool("non_idempotent"),
        "missing",
        REDISPATCH,
        Redispatches(),
        0,
        False,
        "abort",
        0,
    ),
    (
        "non_idempotent, a durable missing: redispatch",
        tool("non_idempotent"),
        "missing",
        REDISPATCH,
        Redispatches(),
        0,
        True,
        "plan",
        1,
    ),
]


@pytest.mark.parametrize(
    (
        "target",
        "observed",
        "policy",
        "redispatches",
        "deferrals",
        "authoritative",
        "action",
        "attempt",
    ),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_verdict_table(
    target: Target,
    observed: Any,
    policy: RecoveryPolicy,
    redispatches: Redispatches,
    deferrals: int,
    authoritative: bool,
    action: str,
    attempt: int,
) -> None:
    d = decide(
        target,
        observed,
        policy,
        redispatches=redispatches,
        deferrals=deferrals,
        authoritative=authoritative,
    )
    assert (d.action, d.attempt) == (action, attempt)
    assert d.verdict == VERDICTS[d.action]
    assert d.observed == observed and d.target == target and d.reason


def test_an_unknown_attachment_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown attachment"):
        decide(MODEL, "weird", DISPOSE)  # type: ignore[arg-type]


def test_every_attachment_has_a_row() -> None:
    assert {row[2] for row in TABLE} == set(ATTACHMENTS)


@pytest.mark.parametrize(
    ("aborted", "action", "verdict", "observed"),
    [(True, "dispose", "dispose", "aborted"), (False, "wait", "keep", "active")],
)
def test_abort_before_dispose_and_a_won_race_keeps(
    aborted: bool, action: str, verdict: str, observed: str
) -> None:
    d = after_abort(decide(MODEL, "missing", DISPOSE), aborted)
    assert (d.action, d.verdict, d.observed) == (action, verdict, observed)


@pytest.mark.parametrize(
    ("answer", "action", "verdict"),
    [
        ("accepted", "follow", "redispatch"),
        ("refused", "give_up", "dispose"),
        ("lost", "retry", "defer"),
    ],
)
def test_what_a_redispatch_answer_leads_to(answer: Any, action: str, verdict: str) -> None:
    d = after_dispatch(decide(tool(), "missing", REDISPATCH), answer)
    assert (d.action, d.verdict, d.attempt) == (action, verdict, 1)


@pytest.mark.parametrize(
    "kw",
    [
        {"missing": "retry"},
        {"max_redispatches": -1},
        {"max_deferrals": True},
        {"defer_wait": 0},
        {"defer_wait": float("nan")},
    ],
)
def test_a_bad_policy_is_a_user_error(kw: dict[str, Any]) -> None:
    with pytest.raises(UserError, match="RecoveryPolicy"):
        RecoveryPolicy(**kw)


# -- the fold of a key's redispatches ------------------------------------------------------


def rec(step: str, attempt: int = 0, reason: str = "") -> RedispatchRecorded:
    return RedispatchRecorded(effect_id="e1", step=step, attempt=attempt, reason=reason, epoch=1)  # type: ignore[arg-type]


FOLDS: list[tuple[str, list[RedispatchRecorded], Redispatches | str]] = [
    (
        "planned, dispatched, planned",
        [rec("planned", 1), rec("dispatched", 1), rec("planned", 2)],
        Redispatches(2, 1),
    ),
    (
        "given up with an attempt owed",
        [rec("planned", 1), rec("given_up", reason="budget")],
        Redispatches(1, 0, True, "budget"),
    ),
    (
        "given up without an attempt",
        [rec("given_up", reason="refused")],
        Redispatches(0, 0, True, "refused"),
    ),
    ("planned out of order", [rec("planned", 2)], "planned after 0"),
    ("planned while one is owed", [rec("planned", 1), rec("planned", 2)], "while 1 is owed"),
    ("dispatched without a plan", [rec("dispatched", 1)], "dispatched with 0 planned"),
    (
        "dispatched twice",
        [rec("planned", 1), rec("dispatched", 1), rec("dispatched", 1)],
        "dispatched with 1",
    ),
    (
        "dispatched another attempt",
        [rec("planned", 1), rec("dispatched", 2)],
        "attempt 2 dispatched",
    ),
    ("nothing after given up", [rec("given_up", reason="x"), rec("planned", 1)], "after given_up"),
]


@pytest.mark.parametrize(("records", "want"), [f[1:] for f in FOLDS], ids=[f[0] for f in FOLDS])
def test_redispatches_fold(records: list[RedispatchRecorded], want: Redispatches | str) -> None:
    if isinstance(want, str):
        with pytest.raises(RedispatchConflict, match=want):
            remember(records)
        return
    memory = remember(records)
    assert memory.redispatches_of("e1") == want
    assert memory.redispatches_of("other") == Redispatches()


def test_owed_is_the_planned_attempt_not_yet_dispatched() -> None:
    assert (
        Redispatches().owed,
        Redispatches(1, 0).owed,
        Redispatches(1, 1).owed,
        Redispatches(3, 2).owed,
    ) == (0, 1, 0, 3)


def test_memory_counts_deferrals_per_key_and_keys_are_independent() -> None:
    defer = verdict_event(decide(tool(), "orphaned", DISPOSE), epoch=1)
    other = verdict_event(decide(MODEL, "orphaned", DISPOSE), epoch=1)
    keep = verdict_event(decide(tool(), "active", DISPOSE), epoch=1)
    memory = remember([defer, keep, defer, other, rec("planned", 1)])
    assert memory.deferrals == {tool().effect_id: 2, MODEL.effect_id: 1}
    assert memory.redispatches_of("e1") == Redispatches(1, 0)


def test_redispatch_records_name_the_key_and_the_attempt() -> None:
    d = decide(tool(), "missing", REDISPATCH)
    assert redispatch_event(d, "planned", 4) == RedispatchRecorded(
        effect_id=tool().effect_id, step="planned", attempt=1, epoch=4
    )
    gave_up = redispatch_event(after_dispatch(d, "refused"), "given_up", 4)
    assert (gave_up.attempt, gave_up.reason) == (0, "redispatch 1 refused: key aborted")


# -- which effects a takeover looks at -------------------------------------------------------


def _log(*events: Event) -> RunState:
    return fold(list(events))


def _requested(call: str, cls: Any, approval: bool = False) -> ToolCallRequested:
    return dataclasses.replace(request(0, call, cls), requires_approval=approval)


CASES: list[tuple[str, list[Event], list[tuple[str, int]]]] = [
    ("the turn's model call, no reply yet", RUNNING_T0, [("", 1)]),
    (
        "the model call after a failed attempt",
        [*RUNNING_T0, ModelCallFailed(turn_index=0, attempt=1, code="rate_limited")],
        [("", 2)],
    ),
    ("read_only calls: the next attempt", AWAITING_TWO, [("a", 1), ("b", 1)]),
    ("non_idempotent, started: that attempt", NI_STARTED, [("a", 1)]),
    (
        "non_idempotent, never started: not dispatched",
        [*RUNNING_T0, reply(0, "a"), request(0, "a", "non_idempotent")],
        [],
    ),
    (
        "non_idempotent, declared unknown",
        [*NI_STARTED, ToolOutcomeUnknown(turn_index=0, tool_call_id="a", reason="x")],
        [],
    ),
    ("waiting on an approval", POLICY_WAIT, [("b", 1)]),
    (
        "consent asked before a first run",
        [*RUNNING_T0, reply(0, "a"), _requested("a", "read_only", approval=True)],
        [],
    ),
    (
        "consent given: may have run",
        [*POLICY_WAIT, ApprovalDecided(turn_index=0, tool_call_id="a", decision="approve")],
        [("a", 1), ("b", 1)],
    ),
    ("a finished run", COMPLETED, []),
    ("a run never started", RUNNING_T0[:1], []),
]


@pytest.mark.parametrize(("log", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_targets(log: list[Event], want: list[tuple[str, int]]) -> None:
    found = targets(fold(log))
    assert [(t.tool_call_id, t.attempt) for t in found] == want
    for t in found:
        assert t.effect_id == effect_id(RUN_ID, t.turn_index, t.tool_call_id or "model", t.attempt)


# -- what a disposal records ---------------------------------------------------------------


def _dispose(state: RunState, target: Target) -> list[Event]:
    d = after_abort(decide(target, "missing", DISPOSE), True)
    return [verdict_event(d, state.epoch)]


SPECS = {f"tool_{c}": ToolSpec(effect_class="read_only") for c in "ab"}


def test_disposing_the_model_call_plans_the_turn_again_under_a_new_key() -> None:
    state = fold(RUNNING_T0)
    (target,) = targets(state)
    for e in _dispose(state, target):
        apply(state, e)
    step = next_step(state, SPECS)
    assert step.kind == "call_model" and step.attempt == 2  # type: ignore[union-attr]
    (again,) = targets(state)
    assert again.effect_id != target.effect_id


@pytest.mark.parametrize(
    ("cls", "has_reconcile", "action"),
    [
        ("read_only", False, "execute"),
        ("idempotent_write", False, "execute"),
        ("non_idempotent", True, "reconcile"),
        ("non_idempotent", False, "ask_human"),
    ],
)
def test_disposing_a_tool_call_settles_it_unknown_and_its_class_decides(
    cls: Any, has_reconcile: bool, action: str
) -> None:
    started = [start(0, "a")] if cls == "non_idempotent" else []
    state = fold([*RUNNING_T0, reply(0, "a"), request(0, "a", cls), *started])
    (target,) = targets(state)
    for e in _dispose(state, target):
        apply(state, e)
    call = state.calls["a"]
    assert call.unknown and call.in_flight
    plan = plan_call(call, ToolSpec(effect_class=cls, has_reconcile=has_reconcile))
    assert plan.action == action
    if action == "execute":  # rerun under a new key, with the call's one idempotency key
        assert plan.attempt == target.attempt + 1
        assert targets(state)[0].effect_id != target.effect_id
    else:  # never again blindly, and the takeover does not look at it twice
        assert targets(state) == []


def test_a_superseded_owner_cannot_record_a_verdict() -> None:
    state = fold([*NI_STARTED, RunRecovered(owner="w2", epoch=2, previous_owner="w1")])
    (target,) = targets(state)
    stale = verdict_event(decide(target, "active", DISPOSE), epoch=1)
    with pytest.raises(Exception, match="not the owner's epoch"):
        apply(state, stale)


# -- by property -----------------------------------------------------------------------------

policies = st.builds(
    RecoveryPolicy,
    missing=st.sampled_from(["dispose", "redispatch"]),
    max_redispatches=st.integers(0, 4),
    max_deferrals=st.integers(0, 4),
)


@st.composite
def redispatches(draw: st.DrawFn) -> Redispatches:
    planned = draw(st.integers(0, 5))
    dispatched = draw(st.sampled_from([planned, max(planned - 1, 0)]))
    return Redispatches(planned, dispatched, draw(st.booleans()), "r")


targets_ = st.sampled_from(
    [MODEL, tool("read_only"), tool("idempotent_write"), tool("non_idempotent")]
)


@settings(max_examples=300, deadline=None)
@given(
    targets_,
    st.sampled_from(ATTACHMENTS),
    policies,
    redispatches(),
    st.integers(0, 6),
    st.booleans(),
    st.booleans(),
)
def test_decide_is_total_and_safe(
    target: Target,
    observed: Any,
    policy: RecoveryPolicy,
    redispatches: Redispatches,
    deferrals: int,
    authoritative: bool,
    aborted: bool,
) -> None:
    d = decide(
        target,
        observed,
        policy,
        redispatches=redispatches,
        deferrals=deferrals,
        authoritative=authoritative,
    )
    assert d.verdict == VERDICTS[d.action]
    if observed in ("active", "terminal"):
        assert d.verdict == "keep"  # what runs, or has settled, is never given up
    if observed == "orphaned":  # deferred until the bound, never disposed on sight
        assert d.verdict == ("defer" if deferrals < policy.max_deferrals else "dispose")
        assert d.action != "abort"  # an accepted key cannot be aborted: cancelled instead
    if d.verdict == "redispatch":
        assert (
            policy.missing == "redispatch" and observed == "missing" and not redispatches.given_up
        )
        assert authoritative or target.effect_class != "non_idempotent"
        assert 1 <= d.attempt <= max(policy.max_redispatches, redispatches.owed)
        # an owed attempt is offered again under its number, never planned anew
        assert (d.action == "offer") == bool(redispatches.owed)
        assert d.attempt == (redispatches.owed or redispatches.planned + 1)
    if d.verdict == "dispose" and observed == "missing":
        assert d.action in ("abort", "give_up")  # the key is closed before the disposal
        assert after_abort(d, aborted).verdict == ("dispose" if aborted else "keep")


@st.composite
def takeovers(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Per takeover, what the executor answers and where the owner dies."""
    n = draw(st.integers(1, 8))
    return [
        (
            draw(st.sampled_from(["missing", "missing", "missing", "active", "aborted"])),
            draw(
                st.sampled_from(["none", "before_plan", "after_planned", "after_accepted", "lost"])
            ),
        )
        for _ in range(n)
    ]


@settings(max_examples=200, deadline=None)
@given(takeovers(), st.integers(0, 3))
def test_a_crash_anywhere_never_overspends_the_budget(
    script: list[tuple[str, str]], budget: int
) -> None:
    """Each takeover decides from the log so far, and the owner may die before it plans,
    after ``planned`` or after the executor accepted (before ``dispatched``): the log's
    redispatches fold, never plan more than the budget, and an attempt the executor accepted is
    never planned a second time."""
    policy = RecoveryPolicy(missing="redispatch", max_redispatches=budget, max_deferrals=99)
    log: list[Event] = []
    accepted: set[int] = set()
    for observed, crash in script:
        memory = remember(log)
        redispatches = memory.redispatches_of(MODEL.effect_id)
        d = decide(MODEL, observed, policy, redispatches=redispatches, authoritative=True)  # type: ignore[arg-type]
        if d.action not in ("plan", "offer") or crash == "before_plan":
            if d.action == "give_up":
                log.append(redispatch_event(d, "given_up", 1))
            if d.verdict == "dispose":
                break
            continue
        if d.action == "plan":
            log.append(redispatch_event(d, "planned", 1))
        if crash == "after_planned":
            continue
        answer = "lost" if crash == "lost" else "accepted"
        if answer == "accepted":
            accepted.add(d.attempt)
        if crash == "after_accepted" or answer == "lost":
            continue
        log.append(redispatch_event(after_dispatch(d, answer), "dispatched", 1))
    final = remember(log).redispatches_of(MODEL.effect_id)
    assert final.planned <= budget
    planned = [e.attempt for e in log if isinstance(e, RedispatchRecorded) and e.step == "planned"]
    assert planned == list(range(1, len(planned) + 1))  # one record per slot, in order
    assert accepted <= set(planned)


@settings(max_examples=60, deadline=None)
@given(run_logs())
def test_every_target_of_any_log_can_be_disposed_and_is_not_seen_again(log: Any) -> None:
    """On any valid log, each effect a takeover finds takes its disposal (the fold accepts
    the verdict and what follows it), and afterwards no effect is looked at under a key that
    was disposed: a tombstoned key is never dispatched again."""
    state = fold(log.events)
    found = targets(state)
    disposed = {t.effect_id for t in found}
    for t in found:
        for e in _dispose(state, t):
            apply(state, e)
    assert not disposed & {t.effect_id for t in targets(state)}
    for e in (
        verdict_event(Decision(target=t, observed="active", action="wait", reason="r"), state.epoch)
        for t in targets(state)
    ):
        assert isinstance(e, EffectReconciled)
        apply(state.copy(), e)


def test_redispatch_step_refuses_planning_while_owed() -> None:
    with pytest.raises(RedispatchConflict):
        redispatch_step(Redispatches(1, 0), rec("planned", 2))


def test_a_redispatch_conflict_names_its_log_position_and_event_index() -> None:
    """Folding a damaged log, the conflict says where: the record's sequence number in the
    run's log and its index among the events folded."""
    other = RedispatchRecorded(effect_id="e0", step="planned", attempt=1, reason="", epoch=1)
    records = [rec("planned", 1), rec("dispatched", 1), rec("dispatched", 1)]
    with pytest.raises(RedispatchConflict) as caught:
        remember([other, *records], [3, 7, 8, 12])
    err = caught.value
    assert (err.position, err.index) == (12, 3)
    assert "log position 12, event index 3" in str(err)
    assert "attempt 1 dispatched" in str(err)
    with pytest.raises(RedispatchConflict, match="at event index 2: "):
        remember(records)
