"""The run loop: ask the core what is next, do it, append what happened, repeat.

    turn:  call the model -> append the reply and its tool calls (write-ahead intent)
           -> run the tools, concurrently -> append each result as soon as it is in
           -> (the last result's commit opens the next turn)

A crash anywhere leaves a log from which ``next_step`` picks up: recorded results are read
back, never re-run, and an in-flight call is recovered by its effect class.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from dataclasses import dataclass
from typing import Literal

from stead import _crash
from stead._signal import AbortSignal
from stead.core.canonical import effect_id
from stead.core.decide import (
    CallModel,
    CallVerdict,
    Fail,
    Finish,
    ResumeTurn,
    RunTools,
    StartRun,
    Wait,
    ask_human_events,
    automatic_events,
    needs_start_record,
    next_step,
    plan_call,
    reconcile_events,
    reply_events,
    started_event,
)
from stead.core.effects import (
    REPLAY_POLICY,
    Assignment,
    AssignmentKey,
    ModelBody,
    ModelFailed,
    ModelSucceeded,
    ToolBody,
    tool_result_of,
)
from stead.core.events import ModelCallFailed, RunStarted, ToolResultRecorded, TurnResumed
from stead.core.failures import is_retryable
from stead.core.fold import CallState
from stead.core.states import RunStatus
from stead.providers import ModelRequest, ModelResponse
from stead.runtime._agent import Agent
from stead.runtime._executor import Executor
from stead.runtime._session import RunSession
from stead.tools import Done, NotDone, ToolContext, Unknown, serialize_result


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retry delays for retryable model failures: exponential, jittered, capped."""

    base: float = 0.5
    """First delay, seconds."""
    cap: float = 30.0
    """Longest delay."""

    def delay(self, attempt: int, retry_after: float | None, rand: random.Random) -> float:
        """Full jitter, but never sooner than the provider's ``retry-after``."""
        jittered = rand.uniform(0, min(self.cap, self.base * 2 ** (attempt - 1)))
        return max(jittered, retry_after or 0.0)


class RunLoop:
    """Drives one claimed run until it finishes or waits on a person."""

    def __init__(
        self,
        session: RunSession,
        agent: Agent,
        executor: Executor,
        signal: AbortSignal,
        *,
        backoff: Backoff | None = None,
        rand: random.Random | None = None,
    ) -> None:
        self.s = session
        self.agent = agent
        self.executor = executor
        self.signal = signal
        self.backoff = backoff or Backoff()
        self.rand = rand or random.Random()
        self.specs = agent.registry.specs()

    async def drive(self) -> RunStatus:
        """Run steps until the run rests; returns the status it rests in."""
        while True:
            state = self.s.state
            step = next_step(state, self.specs, self.agent.limits.max_turns)
            match step:
                case Wait():
                    return step.status
                case StartRun():
                    await self.s.append([RunStarted(owner=self.s.owner, epoch=self.s.epoch)])
                case ResumeTurn():
                    await self.s.append([TurnResumed(turn_index=step.turn_index)])
                case CallModel(turn_recorded=False) | Finish() | Fail():
                    await self.s.append(automatic_events(state, step), automatic=False)
                case CallModel():
                    await self._model_turn(step)
                case RunTools():
                    await asyncio.gather(*(self._settle(p.tool_call_id) for p in step.plans))

    # -- model ------------------------------------------------------------------------------

    def _request(self, turn_index: int) -> ModelRequest:
        return ModelRequest(
            model=self.agent.model.model_name,
            system=self.agent.system,
            messages=tuple(self.s.state.conversation()),
            tools=tuple(self.agent.registry.schemas()),
            max_output_tokens=self.agent.max_output_tokens,
            turn_index=turn_index,
        )

    async def _model_turn(self, step: CallModel) -> None:
        state = self.s.state
        request = self._request(step.turn_index)
        key = AssignmentKey(
            session_id=state.session_id,
            run_id=state.run_id,
            effect_id=effect_id(state.run_id, step.turn_index, "model", step.attempt),
        )
        assignment = Assignment(
            key=key,
            body=ModelBody(
                model=request.model, request=request.to_json(), request_digest=request.digest()
            ),
        )
        await self.executor.dispatch(assignment, signal=self.signal)
        await asyncio.sleep(0)  # let the call actually begin before the crash point
        _crash.point("mid_model_call")
        outcome = await self.executor.outcome(key)
        if isinstance(outcome, ModelFailed):
            await self._model_failed(step, outcome)
            return
        if not isinstance(outcome, ModelSucceeded):
            await self.s.append(
                [
                    ModelCallFailed(
                        turn_index=step.turn_index,
                        attempt=step.attempt,
                        code="executor_error",
                        message=f"outcome {outcome.kind}",
                    )
                ]
            )
            return
        response: ModelResponse = outcome.response
        verdicts = self._verdicts(response)
        events = reply_events(
            state, step.turn_index, response.message, response.usage, response.model, verdicts
        )
        await self.s.append(events)
        if response.message.tool_calls:
            _crash.point("after_intent")

    def _verdicts(self, response: ModelResponse) -> dict[str, CallVerdict]:
        limit = self.agent.limits.max_tool_calls_per_turn
        out: dict[str, CallVerdict] = {}
        for i, call in enumerate(response.message.tool_calls):
            v = self.agent.registry.verdict(call)
            if i >= limit and v.rejection is None:
                v = CallVerdict(
                    tool_call_id=call.id,
                    arguments=v.arguments,
                    effect_class=v.effect_class,
                    rejection=f"not run: at most {limit} tool calls are honoured per turn",
                )
            out[call.id] = v
        return out

    async def _model_failed(self, step: CallModel, failure: ModelFailed) -> None:
        failed = ModelCallFailed(
            turn_index=step.turn_index,
            attempt=step.attempt,
            code=failure.code,
            message=failure.message[:2000],
            usage=failure.usage,
        )
        retry = is_retryable(failure.code) and step.attempt < self.agent.limits.max_model_attempts
        if not retry:
            await self.s.append([failed], automatic=False)
            await self.s.append(
                automatic_events(
                    self.s.state,
                    Fail(
                        code=failure.code,
                        phase="model",
                        message=f"model call failed after {step.attempt} attempt(s): "
                        f"{failure.message}",
                    ),
                ),
                automatic=False,
            )
            return
        await self.s.append([failed], automatic=False)
        delay = self.backoff.delay(step.attempt, failure.retry_after, self.rand)
        waiter = asyncio.ensure_future(self.signal.wait())
        try:
            await asyncio.wait({waiter}, timeout=delay)
        finally:
            waiter.cancel()

    # -- tools ------------------------------------------------------------------------------

    async def _settle(self, call_id: str) -> None:
        """Bring one call to a result, or to a person. Re-plans after every step, so a
        reconcile verdict of not_done flows into a fresh attempt."""
        while True:
            state = self.s.state
            call = state.calls.get(call_id)
            if call is None or call.result is not None or call_id in state.approvals:
                return
            if state.status not in (RunStatus.AWAITING_TOOL, RunStatus.AWAITING_APPROVAL):
                return
            plan = plan_call(call, self.specs.get(call.name))
            if plan.action == "execute":
                await self._execute(call, plan.attempt)
            elif plan.action == "reconcile":
                await self._reconcile(call)
            else:
                await self.s.append(
                    ask_human_events(state, call, secrets.token_urlsafe(16), plan.reason)
                )

    def _context(self, call: CallState, attempt: int) -> ToolContext:
        return ToolContext(
            run_id=self.s.state.run_id,
            tool_call_id=call.tool_call_id,
            turn_index=call.turn_index,
            idempotency_key=call.idempotency_key,
            attempt=attempt,
            tool_name=call.name,
            signal=self.signal,
        )

    async def _execute(self, call: CallState, attempt: int) -> None:
        state = self.s.state
        tool = self.agent.registry.get(call.name)
        if needs_start_record(call):
            await self.s.append([started_event(state, call, attempt)])
            _crash.point("after_tool_started", call.name)
        if tool is None or call.effect_class is None:
            content = f"tool {call.name!r} is not registered in this worker"
            await self._record(call, content, True, attempt)
            return
        key = AssignmentKey(
            session_id=state.session_id,
            run_id=state.run_id,
            effect_id=effect_id(state.run_id, call.turn_index, call.tool_call_id, attempt),
        )
        assignment = Assignment(
            key=key,
            body=ToolBody(
                tool_name=call.name,
                definition_digest=tool.definition_digest,
                arguments=call.effective_arguments(),
                effect_class=call.effect_class,
                replay_policy=REPLAY_POLICY[call.effect_class],
                tool_call_id=call.tool_call_id,
                turn_index=call.turn_index,
                idempotency_key=call.idempotency_key,
                attempt=attempt,
            ),
        )
        await self.executor.dispatch(assignment, signal=self.signal)
        outcome = await self.executor.outcome(key)
        _crash.point("after_tool_effect", call.name)
        settled = tool_result_of(outcome)
        if settled is None:
            if needs_start_record(call):
                # The executor cannot say what happened: the call stays in flight and the
                # next plan reconciles it or asks a person, exactly as after a crash.
                return
            settled = (f"the executor lost this call ({outcome.kind}); try again", True)
        await self._record(call, settled[0], settled[1], attempt)

    async def _record(self, call: CallState, content: str, is_error: bool, attempt: int) -> None:
        await self.s.append(
            [
                ToolResultRecorded(
                    turn_index=call.turn_index,
                    tool_call_id=call.tool_call_id,
                    name=call.name,
                    content=content,
                    is_error=is_error,
                    source="executed",
                    attempt=attempt,
                )
            ]
        )
        _crash.point("after_result_commit", call.name)

    async def _reconcile(self, call: CallState) -> None:
        tool = self.agent.registry.get(call.name)
        answer: Done | NotDone | Unknown
        if tool is None:
            answer = Unknown(reason="tool not registered")
        else:
            answer = await tool.reconcile_call(
                call.effective_arguments(), self._context(call, call.attempts)
            )
        verdict: Literal["done", "not_done", "unknown"]
        content = ""
        if isinstance(answer, Done):
            verdict, content = "done", serialize_result(answer.result)
        elif isinstance(answer, NotDone):
            verdict = "not_done"
        else:
            verdict = "unknown"
        await self.s.append(
            reconcile_events(self.s.state, call, verdict, content, secrets.token_urlsafe(16))
        )
