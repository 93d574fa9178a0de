"""Asking a person a question (a question tool: ``@tool(asks=...)``, ``question_tool``) and
taking the answer from any process (``Runtime.answer``).

The call waits in ``awaiting_approval`` like a policy-gated one (``approval_requested`` with
``reason="question"``: the question and the answer's JSON schema in its payload), so the
inbox, deadlines and sweeps treat it as any other wait. The answer is validated against the
tool's answer type by the answering process (which must know the run's agent), recorded as
``approval_decided`` (``answer``) and becomes the call's result: the model reads it next turn.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stead._crash import CrashHook
from stead.core.builders import (
    decision_events,
    executed_result,
    question_events,
    timeout_events,
    wait_credit_events,
)
from stead.core.effects import ToolFailed, ToolSucceeded
from stead.core.events import Event
from stead.core.fold import CallState, RunState
from stead.core.states import FINISHED, RunStatus
from stead.errors import ApprovalError
from stead.runtime.agent import _checks as checks
from stead.runtime.agent._agent import Agent
from stead.runtime.agent._ids import takes_id_prefix
from stead.runtime.agent._view import RunView
from stead.tools import Tool, ToolContext, serialize_result


async def ask_events(
    tool: Tool[..., Any] | None,
    call: CallState,
    ctx: ToolContext,
    deadline: float | None,
) -> list[Event]:
    """The question of a question tool's call (with a fresh single-use token): its function
    words it from the arguments. A function that fails is the call's error result (the
    model reads why), not a wait."""
    if tool is None or tool.asks is None:
        why = f"tool {call.name!r} is not a question tool in this worker"
        return [executed_result(call, why, True, call.attempts + 1)]
    outcome = await tool.invoke(call.effective_arguments(), ctx)
    if not isinstance(outcome, ToolSucceeded):
        why = outcome.failure if isinstance(outcome, ToolFailed) else outcome.reason
        text = f"the question could not be asked: {why}"
        return [executed_result(call, text, True, call.attempts + 1)]
    token = secrets.token_urlsafe(16)
    return question_events(call, outcome.content, tool.asks.schema, token, deadline)


class Answering:
    """``Runtime.answer``."""

    clock: Callable[[], float]
    _crash: CrashHook

    if TYPE_CHECKING:

        async def state(self, run_id: str) -> RunState: ...

        def _agent_for(self, state: RunState) -> Agent: ...

        async def _append_external(
            self, run_id: str, build: Callable[[RunState], list[Event]], *, epoch: int | None = ...
        ) -> RunState: ...

    @takes_id_prefix
    async def answer(
        self,
        run_id: str,
        tool_call_id: str,
        value: Any,
        *,
        token: str | None = None,
        by: str = "",
    ) -> RunView:
        """Answer a question a run asked (``resume`` in LangGraph's words), from any process,
        any time later: validated against the question's answer type, recorded, and the
        call's result. An answer that does not fit is an ``ApprovalError`` saying why, and
        nothing is written: the run keeps waiting. This Runtime must know the run's agent
        (the answer type is its tool's). The run is not driven here: call ``run`` (or let a
        worker pick it up) to continue it.
        """
        checks.identifier("run_id", run_id)
        checks.identifier("tool_call_id", tool_call_id)
        checks.optional_text("token", token)
        checks.text("by", by)
        state = await self.state(run_id)
        pending = state.approvals.get(tool_call_id)
        if pending is None or pending.reason != "question":
            raise ApprovalError(_nothing_asked(state, tool_call_id))
        call = state.calls[tool_call_id]
        tool = self._agent_for(state).registry.get(call.name)
        if call.deferred:
            # The tool handed the call over to be made elsewhere: the answer is its result,
            # whatever it is (the tool, not a question's type, said what it would be).
            content = serialize_result(value)
        else:
            content = _checked(run_id, state, call.name, tool, value)
        now = self.clock()
        timed_out = await self._append_external(run_id, lambda s: timeout_events(s, now))
        if timed_out.status is RunStatus.TIMED_OUT:
            why = (timed_out.error or {}).get("message", "a deadline passed")
            raise ApprovalError(f"run {run_id} timed out ({why}); `stead resume` asks again")

        def build(s: RunState) -> list[Event]:
            decided = decision_events(
                s, tool_call_id, "answer", token=token, by=by, result=content, now=now
            )
            return decided + wait_credit_events(s, decided, now)

        state = await self._append_external(run_id, build)
        self._crash("after_approval_commit", None)
        return RunView.of(state)


def _checked(
    run_id: str, state: RunState, name: str, tool: Tool[..., Any] | None, value: Any
) -> str:
    """The answer to a question tool's question as the call's result, or an
    ``ApprovalError`` saying why it does not fit (nothing is written then)."""
    if tool is None or tool.asks is None:
        raise ApprovalError(
            f"run {run_id}: tool {name!r} of agent {state.agent!r} is not a question "
            "tool in this process, so its answer cannot be checked; give this Runtime the "
            "agent the run was started with"
        )
    content, problem = tool.asks.check(value)
    if content is None:
        raise ApprovalError(
            f"run {run_id}: the answer does not fit the question's answer type: {problem}. "
            "Nothing was recorded; the run keeps waiting for an answer that fits "
            f"(schema: {tool.asks.schema})"
        )
    return content


def _nothing_asked(state: RunState, tool_call_id: str) -> str:
    """Why there is nothing to answer, and what to do instead."""
    if state.status in FINISHED:
        assert state.status is not None
        return (
            f"run {state.run_id} is {state.status.value}: it waits on no answer "
            "(a resume of a timed-out or cancelled run asks its question again)"
        )
    questions = [a.tool_call_id for a in state.approvals.values() if a.reason == "question"]
    other = state.approvals.get(tool_call_id)
    if other is not None:
        return (
            f"run {state.run_id}: call {tool_call_id!r} asked no question, it waits for "
            f"{'consent' if other.reason == 'policy' else 'whether it happened'}: use "
            "approve/deny or decide"
        )
    return (
        f"run {state.run_id}: call {tool_call_id!r} asked no question that waits for an "
        f"answer (status {state.status.value if state.status else None}; open questions: "
        f"{', '.join(questions) or 'none'}); it may already be answered"
    )
