"""Acting on the reconciler's decisions at a takeover (deciding is ``stead.core.reconcile``).

A new owner of a run, before it drives on, looks at every effect the dead owner left with
intent and no outcome: it asks the executor what it holds for the key (``attach``), lets the
core decide, and does what was decided: aborts a key before it disposes of it, asks a pool
to recover an orphan, hands an effect over again under the key's redispatches (``planned``
before the dispatch, ``dispatched`` after), and writes each verdict into the run's log, where
the timeline shows it. A tool effect kept (still running, or settled) has its outcome
awaited and recorded here; the turn's model call, kept or redispatched, is picked up by the
run loop, which derives the same key and whose ``Executor.run`` attaches to it.

It is written against the ``Executor`` port only. What it uses beyond the port's methods
is optional: ``recover(key)`` (ask the pool to take an orphaned claim back), an
``authoritative`` attribute (True when ``missing`` proves the key never ran), and ``attach``
may be a coroutine.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from stead.core.builders import step_failed_event
from stead.core.effects import (
    Assignment,
    AssignmentKey,
    Cancelled,
    Outcome,
    ToolUnknown,
    tool_assignment,
    tool_result_of,
)
from stead.core.events import Event
from stead.core.ledger import Attachment
from stead.core.reconcile import (
    Decision,
    DispatchAnswer,
    Memory,
    RecoveryPolicy,
    Target,
    after_abort,
    after_dispatch,
    decide,
    redispatch_event,
    remember,
    targets,
    verdict_event,
)
from stead.errors import Conflict, DispatchRejected, Fenced, StoreError

if TYPE_CHECKING:
    from stead.runtime.loop._loop import RunLoop

log = logging.getLogger("stead.runtime")


async def reconcile_takeover(loop: RunLoop, policy: RecoveryPolicy) -> int:
    """Reconcile every in-flight effect of ``loop``'s run; returns how many it looked at.

    A failure that is not the lease's, a race's or the store's (the executor cannot be
    asked, a bug) is recorded as a failed ``reconcile`` step and the drive goes on: the
    effects not yet reconciled are recovered as the run loop recovers any crash (by class,
    under their old keys, none aborted)."""
    found = targets(loop.owned.state)
    if not found:
        return 0
    owned = loop.owned
    try:
        stored = await owned.store.read_events(owned.state.run_id)
        memory = remember((s.event for s in stored), (s.seq for s in stored))
        kept = [t for t in found if await _reconcile(loop, t, memory, policy)]
        cancel = owned.state.cancel_requested
        if kept and (cancel is not None or loop.signal.aborted):
            # A cancel already asked for (or this drive stopping): not awaited, stopped; the
            # run's cancel then closes their calls.
            for t in kept:
                await loop.executor.cancel(_key(loop, t), cancel or loop.signal.reason)
        elif kept:
            await _settle_kept(loop, kept)
    except (Fenced, Conflict, StoreError, asyncio.CancelledError):
        raise
    except Exception as exc:
        log.warning("run %s: reconciling at takeover failed: %r", owned.state.run_id, exc)
        await owned.append([step_failed_event("reconcile", exc)], automatic=False)
    return len(found)


def _key(loop: RunLoop, t: Target) -> AssignmentKey:
    state = loop.owned.state
    return AssignmentKey(session_id=state.session_id, run_id=state.run_id, effect_id=t.effect_id)


async def _attach(loop: RunLoop, key: AssignmentKey) -> Attachment:
    answer: Any = loop.executor.attach(key)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer  # type: ignore[no-any-return]  # decide() refuses an unknown answer


async def _reconcile(loop: RunLoop, t: Target, memory: Memory, policy: RecoveryPolicy) -> bool:
    """Bring one target to a final verdict, acting on the way. True when a tool effect is
    kept (its outcome is to be awaited and recorded)."""
    executor, owned = loop.executor, loop.owned
    key = _key(loop, t)
    authoritative = bool(getattr(executor, "authoritative", False))

    async def record(*events: Event) -> None:
        await owned.append(list(events), automatic=False)
        for e in events:
            memory.see(e)

    def look(observed: Attachment) -> Decision:
        return decide(
            t,
            observed,
            policy,
            redispatches=memory.redispatches_of(t.effect_id),
            deferrals=memory.deferrals.get(t.effect_id, 0),
            authoritative=authoritative,
        )

    d = look(await _attach(loop, key))
    while True:
        epoch = owned.epoch
        match d.action:
            case "wait" | "follow":
                await record(verdict_event(d, epoch))
                return t.kind == "tool"
            case "recover" | "retry":
                await record(verdict_event(d, epoch))
                recover = getattr(executor, "recover", None)
                if d.action == "recover" and recover is not None:
                    with contextlib.suppress(Exception):  # a failed ask leaves it deferred
                        await recover(key)
                await _settled_within(loop, key, policy.defer_wait)
                if loop.signal.aborted:
                    return False  # stopping: the next owner (or the cancel) takes it from here
                d = look(await _attach(loop, key))
            case "give_up" | "abort":
                if d.action == "give_up":
                    await record(redispatch_event(d, "given_up", epoch))
                d = after_abort(d, await executor.abort(key))
            case "cancel":
                await executor.cancel(key, d.reason)
                d = replace(d, action="dispose")
            case "dispose":
                await record(verdict_event(d, epoch))
                return False
            case "plan" | "offer":
                d = await _redispatch(loop, t, d, key, record)


async def _redispatch(
    loop: RunLoop, t: Target, d: Decision, key: AssignmentKey, record: Any
) -> Decision:
    """Hand the effect over again: ``planned`` first (a new attempt only), then the
    dispatch, then ``dispatched`` once it is accepted."""
    built = _assignment(loop, t, key)
    if built is None:
        return replace(d, action="abort", reason="its tool is not registered here")
    if d.action == "plan":
        loop._crash("before_redispatch", None)
        await record(redispatch_event(d, "planned", loop.owned.epoch))
        loop._crash("after_redispatch_planned", None)
    assignment, local = built
    answer: DispatchAnswer
    why = ""
    try:
        accepted = await loop.executor.dispatch(assignment, signal=loop.signal, local=local)
    except (Fenced, StoreError, asyncio.CancelledError):
        raise
    except DispatchRejected as exc:
        # Refused for good: every attempt would be, so the budget is not spent on it.
        log.warning("run %s: redispatch of %s rejected: %s", key.run_id, t.effect_id, exc)
        answer, why = ("lost", "") if exc.retryable else ("rejected", str(exc))
    except Exception as exc:  # no answer (a transport error, a bug): the attempt stays owed
        log.warning("run %s: redispatch of %s: %r", key.run_id, t.effect_id, exc)
        answer = "lost"
    else:
        answer = "accepted" if accepted else "refused"
    if answer == "accepted":
        loop._crash("after_redispatch_accepted", None)
        await record(redispatch_event(d, "dispatched", loop.owned.epoch))
    return after_dispatch(d, answer, why)


def _assignment(loop: RunLoop, t: Target, key: AssignmentKey) -> tuple[Assignment, Any] | None:
    """The assignment the dead owner dispatched under ``key``, rebuilt from the log as the
    run loop builds it (so the key and the body agree)."""
    if t.kind == "model":
        request = loop._request(t.turn_index)
        return Assignment(key=key, body=loop._model_body(request)), request
    call = loop.owned.state.calls[t.tool_call_id]
    tool = loop.agent.registry.get(call.name)
    if tool is None or call.effect_class is None:
        return None
    return tool_assignment(call, key, tool.definition_digest, t.attempt), None


async def _settled_within(loop: RunLoop, key: AssignmentKey, seconds: float) -> None:
    """Wait up to ``seconds`` for a deferred key to settle (or the run to be aborted)."""
    waiter: asyncio.Future[Any] = asyncio.ensure_future(loop.executor.outcome(key))
    aborted: asyncio.Future[Any] = loop._aborted()
    try:
        await asyncio.wait({waiter, aborted}, timeout=seconds, return_when="FIRST_COMPLETED")
    finally:
        waiter.cancel()
        with contextlib.suppress(BaseException):
            await waiter


async def _settle_kept(loop: RunLoop, kept: list[Target]) -> None:
    """Await every kept tool effect's outcome, together, and record each as its result; an
    outcome nobody can vouch for (unknown, or cancelled under a run nobody cancelled) is
    settled ``effect_unknown`` and its class decides. An abort of the run stops the wait and
    asks the executor to cancel them: the run's cancel then closes their calls."""
    waits: dict[asyncio.Future[Any], Target] = {
        asyncio.ensure_future(loop.executor.outcome(_key(loop, t))): t for t in kept
    }
    aborted: asyncio.Future[Any] = loop._aborted()
    pending: set[asyncio.Future[Any]] = set(waits)
    try:
        while pending and not aborted.done():
            done, pending = await asyncio.wait({*pending, aborted}, return_when="FIRST_COMPLETED")
            pending.discard(aborted)
            for fut in done:
                if fut in waits and not loop.signal.aborted:
                    await _record_outcome(loop, waits[fut], fut.result())
    finally:
        for fut in pending:
            fut.cancel()
            await loop.executor.cancel(_key(loop, waits[fut]), loop.signal.reason)
        await asyncio.gather(*pending, return_exceptions=True)


async def _record_outcome(loop: RunLoop, t: Target, outcome: Outcome) -> None:
    call = loop.owned.state.calls.get(t.tool_call_id)
    if call is None or call.result is not None:
        return
    settled = None if isinstance(outcome, ToolUnknown | Cancelled) else tool_result_of(outcome)
    if settled is None:  # disposed: settled effect_unknown, and its class decides
        why = f"its kept effect settled {outcome.kind}"
        gone = Decision(target=t, observed="terminal", action="dispose", reason=why)
        await loop.owned.append([verdict_event(gone, loop.owned.epoch)], automatic=False)
    else:
        await loop._record(call, settled[0], settled[1], t.attempt)
    # The run has recorded what became of the key: an executor with a ledger marks it
    # acknowledged (the dead owner never could).
    acknowledge = getattr(loop.executor, "acknowledge", None)
    if acknowledge is not None:
        await acknowledge(_key(loop, t))
