"""The run loop: ask the core what is next, do it, append what happened, repeat.

    turn:  check the budget -> call the model -> append the reply and its tool calls (the
           write-ahead intent) -> run the tools, concurrently -> append each result as soon as
           it is in -> (the last result's commit opens the next turn; where a commit is a
           network round trip it is still in flight as the next model call starts, and the
           reply waits for it: ``OwnedRun``, "A commit ahead of the model call")

A crash anywhere leaves a log from which ``next_step`` picks up: recorded results are read
back, never re-run, and an in-flight call is recovered by its effect class. A cancel aborts
the one ``AbortSignal`` shared by the model stream and every tool's context; tools get
``Limits.cancel_grace`` seconds to stop, then every open call gets a ``cancelled`` result.
A step that raises (a bug, not a lease or store matter) is written down as ``step_failed``;
``Limits.max_step_failures`` of them in a row fail the run, in whichever processes they were.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from stead import _crash
from stead._crash import CrashHook
from stead._signal import AbortSignal
from stead.core.builders import (
    Consent,
    ask_human_events,
    cancel_events,
    consent_events,
    deferred_events,
    executed_result,
    model_failed_event,
    needs_start_record,
    reconcile_events,
    resumed_turn_event,
    started_event,
    started_run_event,
    step_failed_event,
    unique_call_ids,
)
from stead.core.canonical import effect_id
from stead.core.decide import (
    CallModel,
    Cancel,
    Fail,
    Finish,
    ResumeTurn,
    RunTools,
    StartRun,
    Step,
    ToolPlan,
    Wait,
    automatic_events,
    plan_call,
    step_label,
)
from stead.core.effects import (
    Assignment,
    AssignmentKey,
    ModelBody,
    ModelFailed,
    ModelSucceeded,
    Outcome,
    ToolDeferred,
    ToolSucceeded,
    tool_assignment,
    tool_result_of,
)
from stead.core.events import ToolCallStarted
from stead.core.fold import CallState
from stead.core.messages import Usage
from stead.core.states import AWAITING, RunStatus
from stead.errors import Conflict, Fenced, StoreError
from stead.providers import ModelRequest, ModelResponse, RequestEncoder
from stead.runtime.agent import Agent, ask_events, attachment_bytes, judge, run_settings
from stead.runtime.executors import Executor, InProcessExecutor, tool_context
from stead.runtime.loop._backoff import Backoff, after_model_failure
from stead.runtime.loop._budgeted import in_tree, over_budget, rest_of_tree
from stead.runtime.loop._children import HandlerChildren, descendants_usage, start_child
from stead.runtime.loop._deadline import DeadlineWatch
from stead.runtime.loop._first_wait import at_first_wait
from stead.runtime.loop._large import LargeResults
from stead.runtime.loop._lease_guard import LeaseGuard
from stead.runtime.loop._owned import OwnedRun
from stead.runtime.loop._reply import ReplyIntent, admissions
from stead.runtime.loop._retry import retry_event
from stead.runtime.loop._verdict import verdict
from stead.runtime.loop._waker import abort_future
from stead.tools import Done, NotDone, Tool, ToolContext, Unknown

log = logging.getLogger("stead.runtime")

_RAND = random.Random()
"""Jitter for retry delays. Shared: seeding a new generator per run costs more than a step."""


class RunLoop:
    """Drives one claimed run until it finishes or waits on a person."""

    def __init__(
        self,
        owned: OwnedRun,
        agent: Agent,
        executor: Executor,
        signal: AbortSignal,
        *,
        backoff: Backoff | None = None,
        rand: random.Random | None = None,
        clock: Callable[[], float] | None = None,
        crash: CrashHook = _crash.point,
    ) -> None:
        """``crash`` is called at every named crash point (``stead._crash.POINTS``) the drive
        reaches, with the tool's name where there is one: by default the SIGKILL a test arms,
        a no-op unarmed. Production and crash tests run this same code."""
        self.owned = owned
        self.agent = agent
        self.limits = agent.limits
        self.executor = executor
        self.signal = signal
        self.backoff = backoff or Backoff()
        self.rand = rand or _RAND
        self.clock = clock or owned.clock
        parts = agent._parts  # the same for every run of the agent: worked out once
        self.specs = parts.specs
        self._schemas = parts.schemas
        self._settings = run_settings(agent.settings, owned.state.config)
        self._sent = self._settings.to_json() or None  # recorded on each reply
        self._fixed_chars = len(agent.system) + parts.schema_chars
        self._in_flight: dict[str, AssignmentKey] = {}
        # This process's own executor for this agent's tools, unwrapped: it performs each
        # effect with no assignment, key or effect id (nothing else would read them).
        self._local: InProcessExecutor | None = None
        if type(executor) is InProcessExecutor and executor.tools is agent.registry:
            self._local = executor
        # An executor that performs the live request never reads its JSON: its class says so
        # (a wrapper forwarding attributes to one, as the tracing executor does, reads it).
        local = getattr(type(executor), "performs_local", False)
        self._encoder = None if local else RequestEncoder()
        self._started_early: dict[str, int] = {}
        self._cancels: set[asyncio.Task[None]] = set()
        self._abort_future: asyncio.Future[str] | None = None
        self._alone: asyncio.Task[object] | None = None  # the task of _settle(alone=True)
        self._cut_timer: asyncio.TimerHandle | None = None
        self._cut = False
        self._crash = crash
        self._blobs: dict[str, bytes] | None = None
        self._tree = in_tree(agent, owned.state)
        self._below: Usage | None = None
        self._large: LargeResults | None = None
        if self.limits.result_by_reference is not None:
            self._large = LargeResults(owned.store, self.limits, self.clock)
        self.deadline = DeadlineWatch(owned, self.limits, signal, self.clock)
        self.lease: LeaseGuard | None = None
        """The drive's lease, checked before each effect that is not read_only (set by the
        drive; None where a loop runs under no lease of its own)."""
        self.children: HandlerChildren | None = None  # run_child's port (set by the drive)

    def _deadline(self) -> float | None:
        timeout = self.limits.approval_timeout
        return None if timeout is None else self.clock() + timeout

    async def drive(self) -> RunStatus:
        """Run steps until the run rests; returns the status it rests in.

        A step that raises something that is not about the lease, the store or a cancel is
        recorded (``step_failed``) before the exception goes on to the caller: the next
        claimant, in this process or another, tries the step again, and the
        ``Limits.max_step_failures``-th failure in a row ends the run ``failed`` (this drive
        then returns) instead of every claimant paying for it forever.
        """
        while True:
            if self.signal.aborted:
                if self.owned.fenced:
                    raise Fenced(f"run {self.owned.state.run_id}: {self.signal.reason}")
                await self.owned.reload()  # pick up the cancel request another process wrote
            deadline = self.owned.state.deadline is not None  # Limits.max_duration
            if deadline and (ended := await self.deadline.expired()) is not None:
                return ended
            step = self.owned.next_step()
            if isinstance(step, Wait):
                return step.status
            rewinds = self.owned.rewinds  # held events dropped in the step: start it over
            try:  # one step, performed here (a coroutine per step costs more than it reads)
                match step:  # the two steps of nearly every turn first
                    case CallModel(turn_recorded=True):
                        await self._model_turn(step)
                    case RunTools(plans=[plan]):  # one call: settled in this task
                        seq = self.owned.state.seq
                        await self._settle(plan.tool_call_id, (seq, plan), alone=True)
                    case RunTools():
                        await self._run_tools(step)
                    case Cancel():
                        await self.owned.append(
                            lambda st: cancel_events(st, st.cancel_requested or "")
                        )
                    case StartRun():
                        # Not fsynced on its own: losing run_started (and the turn it opens)
                        # in a power cut loses no effect, and the next commit syncs it anyway.
                        owner, epoch = self.owned.owner, self.owned.epoch
                        opening = [started_run_event(owner, epoch), *self.deadline.start_events()]
                        await self.owned.append(opening, sync=False)
                    case ResumeTurn():
                        await self.owned.append([resumed_turn_event(step.turn_index)])
                    case CallModel() | Finish() | Fail():  # a turn or an end to record
                        opening = automatic_events(self.owned.state, step)
                        await self.owned.append(opening, automatic=False)
            except (Fenced, Conflict, StoreError):
                if self.owned.rewinds == rewinds or self.owned.fenced:
                    raise  # the lease, a race or the database: not the step's fault
            except Exception as exc:
                if self.owned.rewinds != rewinds:
                    continue  # what failed rested on events another writer's append undid
                if self.signal.aborted or self.owned.fenced:
                    raise  # a cancel or a lost lease, surfacing as whatever it broke
                if not await self._step_failed(step, exc):
                    raise

    async def _step_failed(self, step: Step, error: Exception) -> bool:
        """Record a failed step. True when the drive should go on: the failure reached the
        limit, and the next step is to fail the run (or, waiting on a person, to rest).

        The record goes alone, without the automatic events a commit usually carries: those
        may be the very thing that failed. A failure to record it leaves the step's own
        error to the caller (logged here). A ``Fail`` step needs no case of its own: it
        appends one ``run_failed`` onto a running run, which raises only what the store
        raises, and ``drive`` passes that on before this is reached.
        """
        try:
            await self.owned.reload()  # the step may have left the cache anywhere
            label = step_label(self.owned.state, step)
            await self.owned.append([step_failed_event(label, error)], automatic=False)
        except Exception as exc:  # best effort: the step's error is the news
            log.warning("run %s: could not record a failed step: %r", self.owned.state.run_id, exc)
            return False
        log.warning(
            "run %s: step %s failed (%d in a row): %r",
            self.owned.state.run_id,
            label,
            self.owned.state.step_failures,
            error,
        )
        return isinstance(self.owned.next_step(), Fail | Wait)

    # -- model ------------------------------------------------------------------------------

    def _request(self, turn_index: int) -> ModelRequest:
        return ModelRequest(
            model=self.agent.model.model_name,
            system=self.agent.system,
            messages=tuple(self.owned.state.conversation()),
            tools=self._schemas,
            max_output_tokens=self._settings.max_output_tokens or self.agent.max_output_tokens,
            turn_index=turn_index,
            settings=self._settings,
            attachments=self._blobs or {},
        )

    async def _model_turn(self, step: CallModel) -> None:
        state = self.owned.state
        if self._blobs is None:  # once a drive: only user messages carry attachments
            self._blobs = await attachment_bytes(self.owned.store, state.messages)
        request = self._request(step.turn_index)
        if self._large is not None and self.limits.large_result_view == "whole":
            request = await self._large.request(request)
        if self._below is None and self._tree:
            # Once a drive: a run rests while its children run, so what they used is
            # fixed for the length of this drive.
            self._below = await descendants_usage(self.owned.store, state.run_id)
        if not self.agent.budget.unlimited or self._tree:
            below, rest = self._below or Usage(), await rest_of_tree(self.owned.store, state)
            ended = over_budget(self.agent, state, self._fixed_chars, request, below, rest)
            if ended is not None:
                await self.owned.append([ended], automatic=False)
                return
        # ``mid_model_call`` fires once the call is under way (see at_first_wait). Armed
        # or not, the call runs the same way, in this task.
        if self.owned.holding:  # else nothing to write first: no coroutine to await
            await self.owned.before_effect()
        mid = functools.partial(self._crash, "mid_model_call", None)  # no frame of its own
        outcome = await at_first_wait(self._model_call(step, request), mid)
        if self.signal.aborted:
            return  # drive() reloads and cancels; the reply, if any, is not recorded
        if isinstance(outcome, ModelFailed):
            await self._model_failed(step, outcome)
            return
        if not isinstance(outcome, ModelSucceeded):
            failed = model_failed_event(
                step.turn_index, step.attempt, "executor_error", f"outcome {outcome.kind}"
            )
            await self.owned.append([failed], automatic=False)
            return
        response: ModelResponse = outcome.response
        # Ids as the log records them: unique in the run (a reused or repeated id renamed).
        message = unique_call_ids(state, step.turn_index, response.message)
        judged = judge(self.agent.output, step.turn_index, message, admissions(self.agent, message))
        if self.agent.end_check is not None and judged.ends:  # an agent that checks its answer
            verdict = await self.agent.end_check(
                step.turn_index, message, response.usage, response.model
            )
            judged = judged.checked(verdict)
        parts = self.agent._parts  # which of the turn's lists can only be empty, known once
        tokens = (
            {c: secrets.token_urlsafe(16) for c, a in judged.admissions.items() if a.needs_approval}
            if parts.approvals
            else {}
        )
        # Calls whose tool can be reconciled (only non_idempotent tools have a reconcile
        # function); reply_events starts the ones it lets run.
        eager = (
            [c.id for c in message.tool_calls if c.name in parts.reconciled]
            if parts.reconciled
            else []
        )
        # No call asks a person (nearly every turn): no consent to build, no deadline read
        consent = Consent(tokens=tokens, deadline=self._deadline()) if tokens else None
        intent = ReplyIntent(
            judged, response.usage, response.model, self.limits, consent, eager, self._sent
        )
        await self.owned.append(intent)
        # The handlers of these calls have not run: their start record rode in the intent's
        # commit, and only this loop knows it has not acted on it yet.
        self._started_early = (
            {e.tool_call_id: e.attempt for e in intent.built if isinstance(e, ToolCallStarted)}
            if eager
            else {}
        )
        if message.tool_calls:
            self._crash("after_intent", None)

    def _model_call(self, step: CallModel, request: ModelRequest) -> Awaitable[Outcome]:
        """The model call of a turn: performed by this process's own executor with no
        assignment (``InProcessExecutor.perform_model``), else run as one."""
        state = self.owned.state
        if self._local is not None:
            return self._local.perform_model(request, self.signal, state.run_id)
        key = AssignmentKey(
            session_id=state.session_id,
            run_id=state.run_id,
            effect_id=effect_id(state.run_id, step.turn_index, "model", step.attempt),
        )
        assignment = Assignment(key=key, body=self._model_body(request))
        return self.executor.run(assignment, signal=self.signal, local=request)

    def _model_body(self, request: ModelRequest) -> ModelBody:
        """A model call's body: the request's JSON and digest, or neither (``request`` empty)
        for an executor that performs the live request it is handed instead (in-process)."""
        if self._encoder is None:
            return ModelBody(model=request.model, request={}, request_digest="")
        encoded, digest = self._encoder.encode(request)
        return ModelBody(model=request.model, request=encoded, request_digest=digest)

    async def _model_failed(self, step: CallModel, failure: ModelFailed) -> None:
        events, delay = after_model_failure(
            self.owned.state, step, failure, self.limits.max_model_attempts, self.backoff, self.rand
        )
        await self.owned.append(events, automatic=False)
        if delay is not None:
            await self._sleep(delay)

    def _aborted(self) -> asyncio.Future[str]:
        """One future per loop that resolves when the signal is aborted: every wait of the
        run shares it, instead of a new waiter task per turn."""
        if self._abort_future is None:
            self._abort_future = abort_future(self.signal)
        return self._abort_future

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake at once on abort."""
        await asyncio.wait({self._aborted()}, timeout=seconds)

    # -- tools ------------------------------------------------------------------------------

    async def _run_tools(self, step: RunTools) -> None:
        """Settle every open call concurrently (a lone one: ``_settle(alone=True)``); on abort,
        give them the grace period, then stop waiting (their results, if they finish, are
        still recorded)."""
        seq = self.owned.state.seq  # what step.plans were decided on
        tasks = [asyncio.ensure_future(self._settle(p.tool_call_id, (seq, p))) for p in step.plans]
        aborted = self._aborted()
        waitable: set[asyncio.Future[object]] = {*tasks, aborted}  # type: ignore[arg-type]
        while not aborted.done() and not all(t.done() for t in tasks):
            await asyncio.wait(waitable, return_when=asyncio.FIRST_COMPLETED)
        if aborted.done() and not all(t.done() for t in tasks):
            await asyncio.wait(tasks, timeout=self.limits.cancel_grace)
            for key in list(self._in_flight.values()):
                await self.executor.cancel(key, self.signal.reason)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        # Read every task's error before raising the first: a fenced worker's calls all fail
        # with Fenced, and an error left unread is logged by asyncio as a stray traceback.
        errors = [t.exception() for t in tasks if t.done() and not t.cancelled()]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first

    def _alone_begin(self) -> asyncio.Task[object]:
        """``_settle(alone=True)``: the one open call of a step is settled in this task, with
        no task and no wait of its own. Cancellation is the same as for several: on abort the
        call gets ``Limits.cancel_grace`` seconds, then the executor is told to cancel it and
        this task is cancelled out of it (the cancellation absorbed by ``_settle``). A method
        of the loop (``_on_abort``) starts that timer, not closures made for each call; it is
        the abort future's callback only while the call settles (for good, it would make the
        loop a cycle that only the garbage collector frees)."""
        task = asyncio.current_task()
        assert task is not None
        self._alone = task
        self._aborted().add_done_callback(self._on_abort)
        return task

    def _alone_end(self, task: asyncio.Task[object]) -> None:
        self._aborted().remove_done_callback(self._on_abort)
        self._alone = None
        if self._cut_timer is not None:
            self._cut_timer.cancel()
            self._cut_timer = None
        if self._cut:
            self._cut = False
            task.uncancel()

    def _on_abort(self, _: object) -> None:
        """The run was aborted: the call settled alone (``_alone_begin``), if any, gets the grace
        period, then is cut (``_cut_alone``)."""
        if self._alone is not None and self._cut_timer is None:
            loop = asyncio.get_running_loop()
            self._cut_timer = loop.call_later(self.limits.cancel_grace, self._cut_alone)

    def _cut_alone(self) -> None:
        self._cut_timer = None
        task = self._alone
        if task is None:
            return
        self._cut = True
        loop = asyncio.get_running_loop()
        for key in list(self._in_flight.values()):
            asked = loop.create_task(self.executor.cancel(key, self.signal.reason))
            self._cancels.add(asked)
            asked.add_done_callback(self._cancels.discard)
        task.cancel()

    async def _settle(
        self, call_id: str, decided: tuple[int, ToolPlan] | None = None, *, alone: bool = False
    ) -> None:
        """Bring one call to a result, or to a person. Re-plans after every step, so a
        reconcile verdict of not_done flows into a fresh attempt (``decided``: the step's plan
        and the sequence it was made at, taken as it is while the state is still there).
        ``alone``: the step's only call, settled in the drive's task (``_alone_begin``)."""
        task = self._alone_begin() if alone else None
        try:
            while not self.signal.aborted:
                state = self.owned.state
                call = state.calls.get(call_id)
                if call is None or call.result is not None or call_id in state.approvals:
                    return
                if state.status not in AWAITING or state.cancel_requested is not None:
                    return
                early = self._started_early.pop(call_id, None)
                if early is not None and early == call.attempts and call.reconciled is None:
                    await self._execute(call, early, start_recorded=True)
                    continue
                if decided is None or decided[0] != state.seq:
                    decided = (state.seq, plan_call(call, self.specs.get(call.name)))
                plan, decided = decided[1], None
                match plan.action:
                    case "execute":
                        await self._execute(call, plan.attempt)
                    case "reconcile":
                        await self._reconcile(call)
                    case "ask_consent":
                        token = secrets.token_urlsafe(16)
                        await self.owned.append(consent_events(call, token, self._deadline()))
                    case "ask_question":
                        tool, ctx = self.agent.registry.get(call.name), self._context(call, 1)
                        await self.owned.append(await ask_events(tool, call, ctx, self._deadline()))
                    case "start_child":
                        await start_child(self.owned, self.agent, call, self.clock, self._crash)
                    case "ask_human":
                        token = secrets.token_urlsafe(16)
                        await self.owned.append(
                            ask_human_events(state, call, token, plan.reason, self._deadline())
                        )
        except asyncio.CancelledError:
            if task is None or not self._cut or task.cancelling() > 1:
                raise  # not ours, or ours and someone else's: let it through
        finally:
            if task is not None:
                self._alone_end(task)

    def _context(self, call: CallState, attempt: int) -> ToolContext:
        deps = getattr(self.executor, "deps", None)  # the Runtime's, via its executor
        run_id, grace = self.owned.state.run_id, self.limits.cancel_grace
        held = None if self.lease is None else self.lease.held
        return tool_context(run_id, call, call.name, attempt, self.signal, grace, deps, held)

    async def _execute(
        self, call: CallState, attempt: int, *, start_recorded: bool = False
    ) -> None:
        """Run one attempt and record its result. ``start_recorded``: the attempt's
        ``tool_call_started`` is already durable (it rode in the intent's commit)."""
        state = self.owned.state
        tool = self.agent.registry.get(call.name)
        # The lease is checked right before the effect of a tool that is not read_only (a
        # read of the clock while it is fresh), and before its start is written here too,
        # so that a lost lease leaves a call that plainly never started.
        guard = self.lease if call.effect_class != "read_only" else None
        if needs_start_record(call):
            if not start_recorded:
                if guard is not None and not (guard.fresh() or await guard.ready()):
                    return  # the lease is lost: nothing written; the drive stops
                await self.owned.append([started_event(state, call, attempt)])
            self._crash("after_tool_started", call.name)
        if tool is None or call.effect_class is None:
            await self._record(
                call, f"tool {call.name!r} is not registered in this worker", True, attempt
            )
            return
        if self.owned.holding:
            await self.owned.before_effect()
        if guard is not None and not (guard.fresh() or await guard.ready()):
            return  # the lease is lost: no effect; the next owner recovers the call
        if self._local is not None:  # no assignment to make, and cancelled with the task
            outcome = await self._local.perform_tool(
                call, tool, call.effective_arguments(), attempt, self.signal, state.run_id
            )
        else:
            outcome = await self._assigned(call, tool, attempt)
        self._crash("after_tool_effect", call.name)
        children = self.children  # the handler called run_child: it may wait on a child
        if children is not None and children.calls and await children.waits(call):
            return
        if type(outcome) is ToolDeferred:  # it did not act: it asks a person, and the run waits
            token = secrets.token_urlsafe(16)
            asked = deferred_events(
                call, attempt, outcome.ask, outcome.reason, token, self._deadline()
            )
            await self.owned.append(asked)
            return
        if type(outcome) is ToolSucceeded:  # nearly every call: nothing to retry or to read
            settled = (outcome.content, False)
        else:
            maybe = tool_result_of(outcome)
            if maybe is None:
                if needs_start_record(call):
                    # The executor cannot say what happened: the call stays in flight and the
                    # next plan reconciles it or asks a person, exactly as after a crash.
                    return
                maybe = (f"the executor lost this call ({outcome.kind}); try again", True)
            settled = maybe
            if outcome.kind == "cancelled":
                return  # the cancel path writes one result for every open call
            retry = retry_event(tool, call, attempt, outcome, self.backoff, self.rand)
            if retry is not None:  # @tool(retries=...): recorded, then the next plan runs it
                await self.owned.append([retry])
                await self._sleep(retry.retry_in)
                return
        if self._large is not None and not settled[1]:
            settled = (await self._large.record(settled[0]), False)
        # ``_record``, spelled out: a coroutine less on every tool call.
        await self.owned.append([executed_result(call, settled[0], settled[1], attempt)])
        self.owned.when_durable(self._crash, "after_result_commit", call.name)

    async def _assigned(self, call: CallState, tool: Tool[..., Any], attempt: int) -> Outcome:
        """Run one attempt of a call as an assignment, in flight (``_in_flight``) until it
        settles: what an executor that is not this process's own is handed."""
        state = self.owned.state
        key = AssignmentKey(
            session_id=state.session_id,
            run_id=state.run_id,
            effect_id=effect_id(state.run_id, call.turn_index, call.tool_call_id, attempt),
        )
        assignment = tool_assignment(call, key, tool.definition_digest, attempt)
        self._in_flight[call.tool_call_id] = key
        try:
            return await self.executor.run(assignment, signal=self.signal)
        finally:
            self._in_flight.pop(call.tool_call_id, None)

    async def _record(self, call: CallState, content: str, is_error: bool, attempt: int) -> None:
        await self.owned.append([executed_result(call, content, is_error, attempt)])
        self.owned.when_durable(self._crash, "after_result_commit", call.name)

    async def _reconcile(self, call: CallState) -> None:
        tool = self.agent.registry.get(call.name)
        answer: Done | NotDone | Unknown = Unknown(reason="tool not registered")
        if tool is not None:
            answer = await tool.reconcile_call(
                call.effective_arguments(), self._context(call, call.attempts)
            )
        said, content = verdict(answer)
        token, deadline = secrets.token_urlsafe(16), self._deadline()
        await self.owned.append(
            lambda st: reconcile_events(
                st, st.calls[call.tool_call_id], said, content, token, deadline
            )
        )
