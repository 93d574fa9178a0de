"""``next_step`` and ``plan_call`` against the rules they were written as before they were
made cheap (less CPU per step): the decision is the same at every boundary of any
generated log, under any turn or failure limit, and the common plan (a call never started)
is the one ``_plan`` gives. The reference is the earlier code, kept here as the oracle."""

from __future__ import annotations

from collections.abc import Mapping

from core_strategies import RunLog, run_logs
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.core.decide import (
    CallModel,
    Cancel,
    Finish,
    ResumeTurn,
    RunTools,
    StartRun,
    Step,
    ToolPlan,
    ToolSpec,
    Wait,
    _plan,
    _stuck,
    next_step,
    plan_call,
)
from stead.core.fold import CallState, RunState, fold
from stead.core.limits import Limits
from stead.core.states import FINISHED, RunStatus

_READY = ("execute", "reconcile", "ask_question")


def _reference_plan(call: CallState, spec: ToolSpec | None) -> ToolPlan:
    action, why = _plan(call, spec)
    return ToolPlan(
        tool_call_id=call.tool_call_id, action=action, attempt=call.attempts + 1, reason=why
    )


def _reference(state: RunState, tools: Mapping[str, ToolSpec], limits: Limits) -> Step:
    """``next_step`` as it was (with ``_next_step``) before it decided inline."""
    status = state.status
    assert status is not None
    if status in FINISHED:
        return Wait(status=status)
    if state.step_failures >= limits.max_step_failures:
        stuck = _stuck(state, status, limits)
        if stuck is not None:
            return stuck
    if state.cancel_requested is not None:
        return Cancel(reason=state.cancel_requested)
    if status is RunStatus.AWAITING_APPROVAL:
        ready = tuple(
            plan
            for call in state.pending_calls()
            if call.tool_call_id not in state.approvals
            and (plan := _reference_plan(call, tools.get(call.name))).action in _READY
        )
        return RunTools(plans=ready) if ready else Wait(status=status)
    if status is RunStatus.QUEUED:
        return StartRun()
    final = limits.max_turns - 1
    pending = state.pending_calls()
    step: Step
    if status is RunStatus.RUNNING:
        if state.turn_index >= 0 and state.turn_has_reply:
            if pending:
                return ResumeTurn(turn_index=state.turn_index)
            reply = state.last_assistant()
            assert reply is not None
            if not reply.tool_calls:
                return Finish(output=reply.text, stop_reason=reply.stop_reason)
            nxt = state.turn_index + 1
            step = CallModel(turn_index=nxt, turn_recorded=False, attempt=1, final=nxt >= final)
        elif state.turn_index >= 0:
            return CallModel(
                turn_index=state.turn_index,
                turn_recorded=True,
                attempt=state.model_failures + 1,
                final=state.turn_index >= final,
            )
        else:
            step = CallModel(turn_index=0, turn_recorded=False, attempt=1, final=final <= 0)
    elif not pending:
        nxt = state.turn_index + 1
        step = CallModel(turn_index=nxt, turn_recorded=False, attempt=1, final=nxt >= final)
    else:
        return RunTools(plans=tuple(_reference_plan(c, tools.get(c.name)) for c in pending))
    assert isinstance(step, CallModel)
    if step.turn_index >= limits.max_turns:
        if status is RunStatus.AWAITING_TOOL:
            return CallModel(turn_index=step.turn_index, turn_recorded=False, attempt=1, final=True)
        reply = state.last_assistant()
        return Finish(output=reply.text if reply else "", stop_reason="max_turns")
    return step


def _tools(asks: bool) -> dict[str, ToolSpec]:
    return {
        f"tool_{c}": ToolSpec(
            effect_class=c, has_reconcile=c == "non_idempotent", asks=asks and c == "read_only"
        )
        for c in ("read_only", "idempotent_write", "non_idempotent")
    }


@settings(max_examples=60, deadline=None)
@given(run_logs(), st.integers(1, 5), st.integers(1, 3), st.booleans())
def test_next_step_decides_as_the_reference_at_every_boundary(
    log: RunLog, max_turns: int, max_step_failures: int, asks: bool
) -> None:
    tools = _tools(asks)
    limits = Limits(max_turns=max_turns, max_step_failures=max_step_failures)
    for k in log.boundaries()[1:]:
        state = fold(log.events[:k])
        assert next_step(state, tools, limits) == _reference(state, tools, limits), k
        assert next_step(state, tools) == _reference(state, tools, Limits()), k


@settings(max_examples=200, deadline=None)
@given(
    attempts=st.integers(0, 3),
    decision=st.sampled_from([None, "approve", "deny", "happened", "not_happened"]),
    requires_approval=st.booleans(),
    reconciled=st.sampled_from([None, "done", "not_done", "unknown"]),
    effect=st.sampled_from([None, "read_only", "idempotent_write", "non_idempotent"]),
    spec=st.sampled_from(
        [
            None,
            ToolSpec(effect_class="read_only"),
            ToolSpec(effect_class="read_only", asks=True),
            ToolSpec(effect_class="non_idempotent", has_reconcile=True),
        ]
    ),
)
def test_plan_call_plans_as_the_reference(
    attempts: int,
    decision: str | None,
    requires_approval: bool,
    reconciled: str | None,
    effect: str | None,
    spec: ToolSpec | None,
) -> None:
    """The shortcut for a call never started agrees with ``_plan`` on every call."""
    call = CallState(
        turn_index=0,
        tool_call_id="c",
        name="t",
        arguments="{}",
        effect_class=effect,  # type: ignore[arg-type]
        idempotency_key="k",
        requires_approval=requires_approval,
        attempts=attempts,
        reconciled=reconciled,
        decision=decision,  # type: ignore[arg-type]
    )
    assert plan_call(call, spec) == _reference_plan(call, spec)
