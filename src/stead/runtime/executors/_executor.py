"""The executor port, and the default executor that runs effects in this process.

The run loop hands every effect to an executor as an immutable ``Assignment`` and reads back
an ``Outcome``; it never calls a tool or a model directly. Today's executor runs in the
worker's own process; an out-of-process pool implements the same port, which is why the
assignment carries everything (arguments, request) as plain JSON.

Dispatch is idempotent by effect id, and ``abort`` leaves a tombstone: for one key either an
acceptance or an abort exists, never both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from stead import _logs
from stead._lease import HeldLease
from stead._signal import AbortSignal
from stead.core.effects import (
    Cancelled,
    ModelBody,
    ModelFailed,
    ModelSucceeded,
    ToolFailed,
)
from stead.core.ledger import Attachment
from stead.core.messages import ToolSchema, message_from_json
from stead.core.progress import ProgressSink
from stead.core.result_bound import DEFAULT_MAX_RESULT, bound_outcome
from stead.core.settings import ModelSettings
from stead.errors import Aborted, DispatchRejected, ProviderError, ReplayDiverged
from stead.providers import ModelCall, ModelProvider, ModelRequest, failure_code
from stead.tools import Tool, ToolContext, ToolRegistry

if TYPE_CHECKING:  # in annotations only: what runs here is the outcomes it makes
    from stead.core.effects import Assignment, AssignmentKey, Outcome


class Executor(Protocol):
    """Performs effects described by assignments."""

    async def dispatch(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> bool:
        """Accept the assignment (idempotent by key). False if the key was aborted.

        ``local`` is the live object the assignment was encoded from (a ModelRequest); an
        executor in the same process may use it instead of decoding the JSON again.
        """
        ...

    async def outcome(self, key: AssignmentKey) -> Outcome:
        """Wait for and return how the effect settled."""
        ...

    async def run(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> Outcome:
        """``dispatch`` then ``outcome``, in one call. An executor in the caller's process may
        perform the effect in the caller's own task (no task, no extra turns of the event
        loop); cancelling the caller's task then cancels the effect. An aborted key settles
        as ``Cancelled`` without running."""
        ...

    def attach(self, key: AssignmentKey) -> Attachment:
        """Is the effect active, orphaned (held by an executor whose lease lapsed), settled,
        unknown here, or aborted? Synchronous: an executor on a store reads it blocking (it
        is asked on recovery paths only); ``StoreExecutor.attachment`` is the awaitable."""
        ...

    async def abort(self, key: AssignmentKey) -> bool:
        """Tombstone a key never accepted: True if aborted, False if already accepted."""
        ...

    async def cancel(self, key: AssignmentKey, reason: str) -> None:
        """Ask a running effect to stop."""
        ...


def request_from_json(data: dict[str, object]) -> ModelRequest:
    """Rebuild the request an assignment carries."""
    raw_messages = data["messages"]
    raw_tools = data["tools"]
    assert isinstance(raw_messages, list) and isinstance(raw_tools, list)
    return ModelRequest(
        model=str(data["model"]),
        system=str(data["system"]),
        messages=tuple(message_from_json(m) for m in raw_messages),
        tools=tuple(
            ToolSchema(name=t["name"], description=t["description"], parameters=t["parameters"])
            for t in raw_tools
        ),
        max_output_tokens=data["max_output_tokens"],  # type: ignore[arg-type]
        turn_index=int(data["turn_index"]),  # type: ignore[call-overload]
        settings=ModelSettings.from_json(data["settings"]),
    )


@runtime_checkable
class Leased(Protocol):
    """An executor whose effects run under the lease of the drive that owns it: the drive
    hands it its lease (``ctx.aborted``, ``ctx.lease_lost()``, ``ctx.fencing_token``); one
    far away passes it on with every request (``HttpExecutor``)."""

    lease: HeldLease | None


class InProcessExecutor:
    """Runs tool handlers and model calls as asyncio tasks of this process."""

    performs_local = True
    """It performs a model call's live ``ModelRequest`` (``local``) and never reads the
    assignment's JSON of it: the run loop then leaves ``ModelBody.request`` empty instead of
    encoding and digesting the conversation on every turn."""

    def __init__(
        self,
        model: ModelProvider,
        tools: ToolRegistry,
        progress: ProgressSink | None = None,
        *,
        cancel_grace: float = 5.0,
        deps: Any = None,
        max_result: int = DEFAULT_MAX_RESULT,
    ) -> None:
        self._cancel_grace = cancel_grace
        self._max_result = max_result
        """Characters of a tool's result kept when the tool sets no bound of its own."""
        self.deps = deps
        """``ctx.deps`` of the tools this executor runs (the Runtime's, never recorded)."""
        self.lease: HeldLease | None = None
        """The lease of the drive this executor serves (``ctx.lease``, ``ctx.aborted``,
        ``ctx.fencing_token``); set by the drive, one executor per drive."""
        self.leases: dict[str, HeldLease] = {}
        """Leases by effect id, where each key has its own (an executor pool's keys); a key
        not in it runs under ``lease``."""
        self._model = model
        self._tools = tools
        self._progress = progress
        self._tasks: dict[str, asyncio.Future[Outcome]] = {}
        """Effects accepted by ``dispatch``: each a task of its own."""
        self._inline: dict[str, asyncio.Future[Outcome] | None] = {}
        """Effects ``run`` performs in the caller's task, until they end: a future to settle
        then, made only when someone waits for the outcome (``outcome``), which nearly
        never happens."""
        self._signals: dict[str, AbortSignal] = {}
        self._aborted: set[str] = set()
        self._accepted: set[str] = set()
        """Every key ever accepted here: an abort of one loses, even once it is forgotten."""

    @property
    def tools(self) -> ToolRegistry:
        """The tools it runs (the run loop calls ``perform_tool`` only when they are its
        agent's)."""
        return self._tools

    async def dispatch(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> bool:
        k = assignment.key.effect_id
        if k in self._aborted:
            return False
        why = refusal(assignment, self._tools, local)
        if why is not None:
            raise DispatchRejected(f"the in-process executor refuses effect {k}: {why}")
        self._accepted.add(k)
        if k not in self._tasks and k not in self._inline:
            self._signals[k] = signal
            self._tasks[k] = asyncio.ensure_future(self._perform(assignment, signal, local))
        return True

    async def run(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> Outcome:
        """Perform the effect in the calling task: the common path of a worker that waits for
        each effect anyway saves a task and two turns of the event loop per effect. The key is
        accepted (``dispatch`` of it is a no-op, ``attach`` says active, ``outcome`` waits for
        it) until the effect ends."""
        k = assignment.key.effect_id
        if k in self._aborted:
            return Cancelled(reason="the effect was aborted before it started")
        if k in self._tasks or k in self._inline:
            return await self.outcome(assignment.key)
        why = refusal(assignment, self._tools, local)
        if why is not None:  # not performed: a failure that says so
            if isinstance(assignment.body, ModelBody):
                return ModelFailed(code="executor_error", message=why)
            return ToolFailed(failure=why)
        self._inline[k] = None
        self._accepted.add(k)
        self._signals[k] = signal
        try:
            result = await self._perform(assignment, signal, local)
        except asyncio.CancelledError:
            if (waiter := self._inline.pop(k, None)) is not None:
                waiter.cancel()
            raise
        except BaseException as exc:
            if (waiter := self._inline.pop(k, None)) is not None:
                waiter.set_exception(exc)
                waiter.exception()  # mark it retrieved: its waiter may be gone
            raise
        else:
            if (waiter := self._inline.pop(k, None)) is not None:
                waiter.set_result(result)
            return result
        finally:
            self._signals.pop(k, None)

    async def outcome(self, key: AssignmentKey) -> Outcome:
        k = key.effect_id
        if k in self._inline:  # performed by ``run`` in another task: wait for its end
            waiter = self._inline[k]
            if waiter is None:
                waiter = self._inline[k] = asyncio.get_running_loop().create_future()
            return await asyncio.shield(waiter)
        task = self._tasks.get(k)
        if task is None:
            raise KeyError(f"effect {k} was never dispatched here")
        try:
            return await task
        finally:
            if task.done():
                self._tasks.pop(k, None)
                self._signals.pop(k, None)

    def attach(self, key: AssignmentKey) -> Attachment:
        if key.effect_id in self._aborted:
            return "aborted"
        if key.effect_id in self._inline:
            return "active"
        task = self._tasks.get(key.effect_id)
        if task is None:
            return "missing"
        return "terminal" if task.done() else "active"

    async def abort(self, key: AssignmentKey) -> bool:
        if key.effect_id in self._tasks or key.effect_id in self._accepted:
            return False
        self._aborted.add(key.effect_id)
        return True

    async def cancel(self, key: AssignmentKey, reason: str) -> None:
        sig = self._signals.get(key.effect_id)
        if sig is not None:
            sig.abort(reason)
        # An inline effect has no task of its own (it is not in ``_tasks``): it stops with
        # the caller's task.
        task = self._tasks.get(key.effect_id)
        if task is not None and not task.done():
            task.cancel()

    def _perform(self, a: Assignment, signal: AbortSignal, local: object) -> Awaitable[Outcome]:
        """The effect of an assignment, as ``perform_model`` or ``perform_tool`` of it: not a
        coroutine of its own, so an assigned effect awaits as deep as before."""
        body = a.body
        if isinstance(body, ModelBody):
            request = local if isinstance(local, ModelRequest) else None
            if request is None:
                try:
                    request = request_from_json(body.request)
                except Exception as exc:
                    return _ready(_model_error(exc))
            return self.perform_model(request, signal, a.key.run_id)
        tool = self._tools.get(body.tool_name)
        if tool is None:
            gone = f"tool {body.tool_name!r} is no longer registered in this worker"
            return _ready(ToolFailed(failure=gone))
        lease = self.leases.get(a.key.effect_id, self.lease)
        return self.perform_tool(
            body, tool, body.arguments, body.attempt, signal, a.key.run_id, lease
        )

    async def perform_model(
        self, request: ModelRequest, signal: AbortSignal, run_id: str
    ) -> Outcome:
        """One model call, awaited in the caller's task, with no assignment: what the run loop
        calls when this executor is its own (no tracing wrapper, no pool), since nothing
        else then reads the key, the body or the effect id (``run`` builds on it)."""
        # The call's turn and id on every log record it makes.
        ids = _logs.bind_call(request.turn_index, "model")
        try:
            # Each attempt is a new progress generation: it voids the last one's deltas.
            progress = self._progress
            sink = progress.begin(run_id, request.turn_index) if progress else None
            response = await self._model.complete(ModelCall(request, signal, sink))
            return ModelSucceeded(response=response)
        except ProviderError as exc:
            if signal.aborted:
                return Cancelled(reason=signal.reason)
            return ModelFailed(
                code=exc.code, message=str(exc), retry_after=_retry_after(exc), usage=exc.usage
            )
        except (Aborted, asyncio.CancelledError) as exc:
            return _cancelled(exc, signal)
        except ReplayDiverged:
            raise  # the agent's code, not this call: the step fails and names it
        except Exception as exc:
            return _model_error(exc)
        finally:
            _logs.unbind(ids)

    async def perform_tool(
        self,
        call: CallIdentity,
        tool: Tool[..., Any],
        arguments: str,
        attempt: int,
        signal: AbortSignal,
        run_id: str,
        lease: HeldLease | None = None,
    ) -> Outcome:
        """One attempt of a tool call with these (canonical) arguments, awaited in the caller's
        task, with no assignment (see ``perform_model``): ``call`` names it (its ``ToolBody``
        or the run's ``CallState``); under ``lease`` (else the executor's)."""
        ids = _logs.bind_call(call.turn_index, call.tool_call_id)  # its tool's records too
        try:
            held = self.lease if lease is None else lease
            ctx = tool_context(
                run_id, call, tool.name, attempt, signal, self._cancel_grace, self.deps, held
            )
            outcome = await tool.invoke(arguments, ctx)
            # Cut here, where every executor's tool outcome is made, so no store, ledger or
            # model ever holds more of it than the bound.
            return bound_outcome(outcome, tool.max_result or self._max_result)
        except (Aborted, asyncio.CancelledError) as exc:
            return _cancelled(exc, signal)
        except ReplayDiverged:
            raise  # the agent's code, not this call: the step fails and names it
        except TimeoutError as exc:
            return ToolFailed(failure=f"TimeoutError: {exc}")
        except Exception as exc:
            return ToolFailed(failure=f"{type(exc).__name__}: {exc}")
        finally:
            _logs.unbind(ids)


def refusal(a: Assignment, tools: ToolRegistry, local: object | None = None) -> str | None:
    """Why an executor with ``tools`` must not perform ``a`` as it is described, or None.

    A model assignment's request must be for the model it names, and be the one its digest
    says (unless the live request, ``local``, is performed instead of its JSON); a tool
    assignment's definition digest must be the tool's here: a changed tool (other
    parameters, another meaning) must not run arguments the model wrote for the old one. An
    empty digest states none (an assignment made by hand); a tool not registered here is
    not refused: it settles as a failure that says so."""
    body = a.body
    if isinstance(body, ModelBody):
        if isinstance(local, ModelRequest) or not body.request:
            return None
        named = body.request.get("model")
        if named != body.model:
            return f"it names model {body.model!r} and carries a request for {named!r}"
        if not body.request_digest:
            return None
        try:
            actual = request_from_json(body.request).digest()
        except Exception as exc:
            return f"its request cannot be read: {type(exc).__name__}: {exc}"
        if actual != body.request_digest:
            return f"its request digest {body.request_digest[:12]} is not its request's"
        return None
    tool = tools.get(body.tool_name)
    stated = body.definition_digest
    if tool is None or not stated or stated == tool.definition_digest:
        return None
    return (
        f"tool {body.tool_name!r} is defined here with digest {tool.definition_digest[:12]}, "
        f"and the assignment was made for {stated[:12]}"
    )


async def _ready(outcome: Outcome) -> Outcome:
    """An outcome known without performing anything, as the awaitable ``_perform`` gives."""
    return outcome


def _cancelled(exc: BaseException, signal: AbortSignal) -> Cancelled:
    """A cancel of the effect's signal as its outcome; any other cancel goes on (raised)."""
    if isinstance(exc, asyncio.CancelledError) and not signal.aborted:
        raise exc
    return Cancelled(reason=str(exc) or signal.reason)


def _model_error(exc: Exception) -> ModelFailed:
    """A provider's failure that is not a ``ProviderError`` (a custom provider's own): its
    code from what it carries (an HTTP status in its chain, a transport failure), so that a
    503 is retried as the built-in adapters' is; anything else is the executor's error."""
    code = failure_code(exc) or "executor_error"
    return ModelFailed(code=code, message=f"{type(exc).__name__}: {exc}")


class CallIdentity(Protocol):
    """What names a tool call in its run: a ``ToolBody`` of an assignment, a ``CallState``."""

    @property
    def tool_call_id(self) -> str: ...
    @property
    def turn_index(self) -> int: ...
    @property
    def idempotency_key(self) -> str: ...


def tool_context(
    run_id: str,
    call: CallIdentity,
    tool_name: str,
    attempt: int,
    signal: AbortSignal,
    cancel_grace: float,
    deps: Any,
    lease: HeldLease | None = None,
) -> ToolContext:
    """The ``ToolContext`` of one attempt of a call: one definition for the executor that
    runs the call and the loop that asks or reconciles it, so both hand a tool the same.
    Spelled out, not a comprehension over the field names: this is every tool call."""
    return ToolContext(
        run_id=run_id,
        tool_call_id=call.tool_call_id,
        turn_index=call.turn_index,
        idempotency_key=call.idempotency_key,
        attempt=attempt,
        tool_name=tool_name,
        signal=signal,
        cancel_grace=cancel_grace,
        deps=deps,
        lease=lease,
    )


def _retry_after(exc: ProviderError) -> float | None:
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, int | float) else None
