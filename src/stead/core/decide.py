"""Given a run's folded state, what happens next. Pure: no I/O, no clock, no randomness.

``next_step(state, tools, limits)`` returns one ``Step``; the runtime performs it and appends
what happened. Recovery after a crash is not a special path: a resumed run is folded and asked
the same question, and the answer for a call that was in flight follows docs/design.md's
Guarantee 3:

* ``read_only`` — run it again.
* ``idempotent_write`` — run it again; it carries the same idempotency key.
* ``non_idempotent`` — never run again blindly: reconcile (if the tool can), else a person
  decides (``awaiting_approval``). A call whose intent was recorded but which never started
  is not in flight and simply runs.

A call that needs a person's consent (the tool's approval policy) waits for it before its
first run, and again after a timeout or a resume, until someone decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from stead.core.codegen import fast_init
from stead.core.events import (
    EffectClass,
    Event,
    NoticeInjected,
    RunCompleted,
    RunFailed,
    TurnStarted,
)
from stead.core.failures import FailurePhase
from stead.core.fold import CallState, RunState
from stead.core.limits import Limits
from stead.core.states import FAILABLE, FINISHED, RunStatus
from stead.core.tagged import TaggedRecord, tagged

FINAL_TURN_NOTICE = (
    "This is your final turn: tools are no longer available. Give your best final answer now. "
    "If the task is not finished, reply with a structured handoff instead: what was done, "
    "what remains, and what you would do next."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the core needs to know of a registered tool (not its code)."""

    effect_class: EffectClass
    has_reconcile: bool = False
    """Whether it offers a status-check function for in-flight calls."""
    asks: bool = False
    """A question tool: a call waits for a person's answer, which is its result (also set
    for a tool that starts a child run: its call waits too)."""
    child: bool = False
    """A call starts a child run (``stead.agent_tool``) and waits for its end."""


# -- steps ---------------------------------------------------------------------------------


@tagged("start_run")
class StartRun(TaggedRecord):
    """A queued run: record run_started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _TurnStep(TaggedRecord):
    """A step of turn ``turn_index`` (its label names the turn)."""

    turn_index: int


@tagged("resume_turn")
class ResumeTurn(_TurnStep):
    """A requeued run whose last turn has open calls: record turn_resumed."""


@tagged("call_model")
class CallModel(_TurnStep):
    """Ask the model for turn ``turn_index``."""

    turn_recorded: bool
    """turn_started is already in the log (a retry or a resume mid-call)."""
    attempt: int
    """1 + failed attempts so far in this turn."""
    final: bool = False
    """The last turn ``max_turns`` allows: the model is told to answer without tools."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolPlan:
    """What to do with one unsettled call."""

    tool_call_id: str
    action: Literal[
        "execute", "reconcile", "ask_human", "ask_consent", "ask_question", "start_child"
    ]
    """Run the handler, ask the reconcile function, ask a person whether it happened, ask
    a person for consent before it runs, ask a question tool's question, or start (or
    find) the call's child run and wait for it."""
    attempt: int
    """The attempt number an execute would use."""
    reason: str
    """Why (shown in the timeline)."""


@tagged("run_tools")
class RunTools(TaggedRecord):
    """Settle the open calls of the current turn."""

    plans: tuple[ToolPlan, ...]
    """One plan per unsettled call, in the model's order."""


@tagged("finish")
class Finish(TaggedRecord):
    """Complete the run: a reply without tool calls, or the turn limit with a handoff."""

    output: str
    """The final answer (or the handoff)."""
    stop_reason: str
    """Why."""


@tagged("fail")
class Fail(TaggedRecord):
    """The run cannot go on: record run_failed."""

    code: str
    """Stable failure code."""
    phase: FailurePhase
    """Where it failed."""
    message: str
    """Detail for a person."""
    details: dict[str, Any] | None = None
    """Structured evidence for ``RunFailed.details``."""


@tagged("cancel")
class Cancel(TaggedRecord):
    """A cancel was requested: abort in-flight work, close open calls, record run_cancelled."""

    reason: str
    """The request's reason."""


@tagged("wait")
class Wait(TaggedRecord):
    """Nothing a worker can do: finished, or waiting on a person."""

    status: RunStatus
    """The status it rests in."""


Step: TypeAlias = StartRun | ResumeTurn | CallModel | RunTools | Finish | Fail | Cancel | Wait


_READY = ("execute", "reconcile", "ask_question", "start_child")
"""Plans that go ahead while other calls of the turn wait on a person."""


def plan_call(call: CallState, spec: ToolSpec | None) -> ToolPlan:
    """Recovery (and consent) rule for one unsettled call."""
    action: _Action
    if (
        call.attempts == 0
        and call.decision is None
        and not call.requires_approval
        and (spec is None or not spec.asks)
    ):
        action, why = "execute", "not started"  # nearly every call: what _plan says of it
    else:
        action, why = _plan(call, spec)
    return ToolPlan(
        tool_call_id=call.tool_call_id, action=action, attempt=call.attempts + 1, reason=why
    )


_Action: TypeAlias = Literal[
    "execute", "reconcile", "ask_human", "ask_consent", "ask_question", "start_child"
]


def _plan(call: CallState, spec: ToolSpec | None) -> tuple[_Action, str]:
    """``plan_call``'s (action, reason): one tuple, not a closure built per call."""
    if call.decision in ("approve", "not_happened"):
        return "execute", f"a person decided {call.decision}"
    if spec is not None and spec.asks:
        if spec.child:
            return "start_child", "its work is a child run: started once, then waited on"
        return "ask_question", "a question tool waits for a person's answer"
    if not call.in_flight:
        if call.requires_approval:
            return "ask_consent", "the tool's policy asks a person first"
        return "execute", "not started"
    effect = call.effect_class
    if effect == "read_only":
        return "execute", "read_only: safe to run again"
    if effect == "idempotent_write":
        return "execute", "idempotent_write: run again with the same idempotency key"
    # non_idempotent (or a tool that vanished): never blindly again.
    if call.reconciled == "not_done":
        return "execute", "reconcile said it did not happen"
    if call.reconciled is None and spec is not None and spec.has_reconcile:
        return "reconcile", "in flight when its worker died; asking its reconcile function"
    why = (
        "reconcile could not tell whether it happened"
        if call.reconciled == "unknown"
        else "in flight when its worker died and it has no reconcile function"
    )
    return "ask_human", why


def next_step(state: RunState, tools: Mapping[str, ToolSpec], limits: Limits | None = None) -> Step:
    """The one thing to do next for this run."""
    limits = limits or _LIMITS
    status = state.status
    if status is None:
        raise ValueError("empty run state")
    if status in FINISHED:
        return Wait(status=status)
    if state.step_failures >= limits.max_step_failures:
        stuck = _stuck(state, status, limits)
        if stuck is not None:
            return stuck
    if state.cancel_requested is not None:
        return Cancel(reason=state.cancel_requested)
    # The two statuses of nearly every step first, decided inline (this runs on every
    # step): running (a turn to open, a model call to make or to finish on) and
    # awaiting_tool (calls to settle, or the next turn once they are).
    if status is RunStatus.RUNNING:
        turn = state.turn_index
        if turn < 0:
            return _open_turn(state, status, 0, limits)
        if not state.turn_has_reply:  # turn started, no reply yet: (re)issue the call
            final = turn >= limits.max_turns - 1
            return CallModel(
                turn_index=turn, turn_recorded=True, attempt=state.model_failures + 1, final=final
            )
        for call in state.calls.values():
            if call.result is None:
                return ResumeTurn(turn_index=turn)
        reply = state.last_assistant()
        assert reply is not None
        if not reply.tool_calls:
            return Finish(output=reply.text, stop_reason=reply.stop_reason)
        return _open_turn(state, status, turn + 1, limits)
    if status is RunStatus.AWAITING_TOOL:
        pending = [c for c in state.calls.values() if c.result is None]
        if not pending:
            return _open_turn(state, status, state.turn_index + 1, limits)
        return RunTools(plans=tuple([plan_call(c, tools.get(c.name)) for c in pending]))
    if status is RunStatus.AWAITING_APPROVAL:
        # A person decides on some calls; the turn's others need not wait for that. Calls
        # that can settle without a person (run, or reconcile) go ahead now, so their results
        # are in when the decision comes, and a question is asked now too (the person may
        # answer it with the decision); the run then rests until it does.
        ready = tuple(
            plan
            for call in state.pending_calls()
            if call.tool_call_id not in state.approvals
            and (plan := plan_call(call, tools.get(call.name))).action in _READY
        )
        return RunTools(plans=ready) if ready else Wait(status=status)
    return StartRun()  # queued


_LIMITS: Final = Limits()
"""The limits of a caller that gives none (one object, not one per decision)."""


def _open_turn(state: RunState, status: RunStatus, turn: int, limits: Limits) -> Step:
    """The step that opens turn ``turn``: its model call, or the end ``max_turns`` makes."""
    if turn < limits.max_turns:
        return CallModel(
            turn_index=turn, turn_recorded=False, attempt=1, final=turn >= limits.max_turns - 1
        )
    if status is RunStatus.AWAITING_TOOL:
        # Tools ran in what is now past the limit (it was lowered before a resume): one
        # last turn, told to hand off, is the only legal way to an answer.
        return CallModel(turn_index=turn, turn_recorded=False, attempt=1, final=True)
    reply = state.last_assistant()
    return Finish(output=reply.text if reply else "", stop_reason="max_turns")


def step_label(state: RunState, step: Step) -> str:
    """A short name for a step, for ``step_failed`` and its evidence: kind and turn."""
    turn = step.turn_index if isinstance(step, _TurnStep) else state.turn_index
    return f"{step.kind} (turn {turn})" if turn >= 0 else step.kind


def _stuck(state: RunState, status: RunStatus, limits: Limits) -> Step | None:
    """The answer to a step that failed ``max_step_failures`` times in a row: the run fails
    with the evidence (or, waiting on a person, rests until the decision, which is progress).
    A queued run cannot fail: its step, recording run_started, is retried."""
    last = state.last_step_failure
    assert last is not None
    if status is RunStatus.AWAITING_APPROVAL:
        return Wait(status=status)
    if status not in FAILABLE:
        return None
    return Fail(
        code="step_failed",
        phase="runtime",
        message=(
            f"step {last.step} failed {state.step_failures} times in a row "
            f"(limit {limits.max_step_failures}): {last.error_type}: {last.message}"
        ),
        details={
            "step": last.step,
            "error_type": last.error_type,
            "message": last.message,
            "failures": state.step_failures,
        },
    )


def after_opening(step: Step) -> Step | None:
    """The step ``next_step`` returns once ``automatic_events(state, step)`` are applied to
    the state ``step`` was decided on, when it follows from ``step`` alone: a turn just opened
    (``turn_started``, and the final-turn notice) is always followed by its model call,
    attempt 1 (the open resets the failure counts; a cancel or a stuck step would have been
    the step instead). None when it does not follow: decide again. The runtime uses it so a
    tool result's commit, which opens the next turn, costs one decision instead of two
    (``tests/core/test_decide.py`` holds it to ``next_step``)."""
    if type(step) is CallModel and not step.turn_recorded:
        return CallModel(
            turn_index=step.turn_index, turn_recorded=True, attempt=1, final=step.final
        )
    return None


OPENING_STEPS: Final = frozenset({CallModel, Finish, Fail})
"""The step types ``automatic_events`` may make events for: for any other it returns [], so
a caller on the hot path can skip the call."""


def automatic_events(state: RunState, step: Step) -> list[Event]:
    """Bookkeeping a step needs before any effect: it can ride in the commit that led to it.

    Opening the next turn once the last result is in (with the final-turn notice when it is
    the last one), or completing the run once a reply without tool calls is in, involves no
    effect, so the runtime appends these in the same transaction as the events that made them
    due. That saves an fsync per turn without weakening any guarantee: each is durable before
    the effect it precedes.
    """
    # The steps are final classes: a type test each, not a chain of class patterns.
    if type(step) is CallModel:
        if step.turn_recorded:
            return []
        opening: list[Event] = [TurnStarted(turn_index=step.turn_index)]
        if step.final:
            opening.append(
                NoticeInjected(
                    turn_index=step.turn_index, content=FINAL_TURN_NOTICE, reason="final_turn"
                )
            )
        return opening
    if type(step) is Finish:
        return [RunCompleted(output=step.output, stop_reason=step.stop_reason, usage=state.usage)]
    if type(step) is Fail:
        return [
            RunFailed(
                code=step.code,
                phase=step.phase,
                message=step.message,
                last_seq=state.seq,
                details=step.details,
            )
        ]
    return []
