"""``StoreExecutor``: the ``Executor`` port on the execution ledger, and the routing to it.

The run's owner dispatches an assignment by accepting its key in the ledger (idempotent by
key; refused once the key is aborted); an executor process (``stead executor``, ``Pool``)
claims it, performs it and settles it; the owner waits for the settle through the ledger's
watcher (a notice is a wake-up to re-read, polls besides) and reads the durable outcome.
Waiters on one key share one read of it.

``routed`` is what a ``Runtime`` builds for an agent: its ``InProcessExecutor`` itself when
no tool of the agent names a queue (nothing changes for users who never start a pool), else a
``RoutingExecutor`` that sends a queued tool's calls to the ledger while a live executor
serves that queue, and runs everything else in process as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from stead import _crash
from stead._crash import CrashHook
from stead._lease import HeldLease
from stead._signal import AbortSignal
from stead.core.effects import (
    Assignment,
    AssignmentKey,
    Cancelled,
    ModelBody,
    ModelFailed,
    ModelSucceeded,
    Outcome,
    ToolBody,
    ToolDeferred,
    ToolFailed,
    ToolSucceeded,
    ToolUnknown,
    assignment_to_json,
)
from stead.core.failures import MODEL_FAILURE_CODES
from stead.core.ledger import Attachment, attachment_of
from stead.core.messages import AssistantMessage, Usage, message_from_json, message_to_json
from stead.core.progress import ProgressSink
from stead.errors import ExecutorError, StoreError
from stead.providers import ModelResponse
from stead.runtime.executors._executor import Executor, InProcessExecutor
from stead.runtime.executors._far_progress import Follower, far_sink
from stead.store import Ledger, is_transient, ledger_for

log = logging.getLogger("stead.runtime")

# -- outcomes on the wire ----------------------------------------------------------------------


def outcome_to_json(o: Outcome) -> dict[str, Any]:
    """An outcome as the ledger stores it (``settled{outcome}``)."""
    if isinstance(o, ModelSucceeded):
        r: ModelResponse = o.response
        return {
            "kind": o.kind,
            "message": message_to_json(r.message),
            "usage": r.usage.to_json(),
            "model": r.model,
        }
    if isinstance(o, ModelFailed):
        out: dict[str, Any] = {"kind": o.kind, "code": o.code, "message": o.message}
        if o.retry_after is not None:
            out["retry_after"] = o.retry_after
        if o.usage is not None:
            out["usage"] = o.usage.to_json()
        return out
    if isinstance(o, ToolSucceeded):
        return {"kind": o.kind, "content": o.content}
    if isinstance(o, ToolFailed):
        return {"kind": o.kind, "failure": o.failure, "retry": o.retry}
    if isinstance(o, ToolDeferred):
        return {"kind": o.kind, "ask": o.ask, "reason": o.reason}
    return {"kind": o.kind, "reason": o.reason}


_FIELDS = {
    "model_succeeded": {"kind", "message", "usage", "model"},
    "model_failed": {"kind", "code", "message", "retry_after", "usage"},
    "tool_succeeded": {"kind", "content"},
    "tool_failed": {"kind", "failure", "retry"},
    "tool_unknown": {"kind", "reason"},
    "tool_deferred": {"kind", "ask", "reason"},
    "cancelled": {"kind", "reason"},
}
"""The fields each outcome kind may carry (``outcome_to_json`` writes no others)."""


def outcome_from_json(d: Any) -> Outcome:
    """Decode ``outcome_to_json`` (from the ledger, or from an executor over HTTP);
    ``ValueError`` for anything else, a missing or mistyped field included, and a field of
    another kind (the outcome is sealed: its kind and its fields agree, or it is refused)."""
    if not isinstance(d, dict) or not isinstance(d.get("kind"), str):
        raise ValueError("an outcome is a JSON object with a kind")
    extra = d.keys() - _FIELDS.get(d["kind"], d.keys())
    if extra:
        raise ValueError(f"outcome {d['kind']!r} does not match its kind: {sorted(extra)}")
    try:
        return _outcome(d)
    except KeyError as exc:
        raise ValueError(f"outcome {d['kind']!r} has no {exc.args[0]!r}") from exc
    except (TypeError, AttributeError, RecursionError) as exc:
        raise ValueError(f"malformed outcome {d['kind']!r}: {exc}") from exc


def _field(d: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    """``d[name]`` of exactly this type (no coercion: a number where text belongs is damage,
    not something to paper over); ``default`` when it is absent and one is given."""
    if name not in d and default is not ...:
        return default
    value = d[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
        raise ValueError(f"its {name!r} is {type(value).__name__}, not {_names(kind)}")
    return value


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))


def _outcome(d: dict[str, Any]) -> Outcome:
    kind = d["kind"]
    if kind == "model_succeeded":
        message = message_from_json(_field(d, "message", dict))
        if not isinstance(message, AssistantMessage):
            raise ValueError("a model outcome carries an assistant message")
        usage = Usage.from_json(_field(d, "usage", dict, {}))
        return ModelSucceeded(
            response=ModelResponse(message=message, usage=usage, model=_field(d, "model", str, ""))
        )
    if kind == "model_failed":
        code = _field(d, "code", str)
        if code not in MODEL_FAILURE_CODES:
            raise ValueError(f"its code {code[:60]!r} is no model failure code stead knows")
        retry_after = _field(d, "retry_after", (int, float, type(None)), None)
        if retry_after is not None and not (math.isfinite(retry_after) and retry_after >= 0):
            raise ValueError(f"its retry_after {retry_after!r} is not a number of seconds")
        usage_json = _field(d, "usage", (dict, type(None)), None)
        return ModelFailed(
            code=code,
            message=_field(d, "message", str, ""),
            retry_after=retry_after,
            usage=None if usage_json is None else Usage.from_json(usage_json),
        )
    if kind == "tool_succeeded":
        return ToolSucceeded(content=_field(d, "content", str))
    if kind == "tool_failed":
        return ToolFailed(failure=_field(d, "failure", str), retry=_field(d, "retry", bool, False))
    if kind == "tool_unknown":
        return ToolUnknown(reason=_field(d, "reason", str, ""))
    if kind == "tool_deferred":
        ask = _field(d, "ask", str)
        if ask not in ("approval", "result"):
            raise ValueError(f"its ask {ask[:60]!r} is neither 'approval' nor 'result'")
        return ToolDeferred(ask=ask, reason=_field(d, "reason", str, ""))
    if kind == "cancelled":
        return Cancelled(reason=_field(d, "reason", str, ""))
    raise ValueError(f"unknown outcome kind {kind[:60]!r}")


def read_outcome(d: Any, key: AssignmentKey, executor: str) -> Outcome:
    """``outcome_from_json`` of what ``executor`` settled ``key`` with; ``ExecutorError``
    naming both for anything that is not an outcome."""
    try:
        return outcome_from_json(d)
    except ValueError as exc:
        raise ExecutorError(key.run_id, key.effect_id, executor, str(exc)[:500]) from exc


def _forget(reads: dict[str, Any], key: str, _: object) -> None:
    reads.pop(key, None)


def _key(k: AssignmentKey) -> tuple[str, str, str]:
    return (k.effect_id, k.run_id, k.session_id)


class StoreExecutor:
    """The ``Executor`` port on the ledger of a SQL store: effects run in executor processes.

    ``queue_of(assignment)`` names the queue an assignment goes to (a tool's ``queue=``);
    ``clock`` gives the times every ledger write is stamped with and leases are judged by;
    ``crash`` is the run's crash hook (``after_dispatch``: the ledger accepted the effect,
    the owner has not seen its outcome).
    """

    def __init__(
        self,
        store: object,
        *,
        queue_of: Callable[[Assignment], str] | None = None,
        clock: Callable[[], float] = time.time,
        wait_round: float = 5.0,
        ledger: Ledger | None = None,
        crash: CrashHook = _crash.point,
        progress: ProgressSink | None = None,
    ) -> None:
        """``progress``: where a model call's deltas from its executor go (the owner's
        window: ``runtime._far_progress``)."""
        self._progress = progress
        self.ledger = ledger if ledger is not None else ledger_for(store)
        self._crash = crash
        self._owns_ledger = ledger is None
        self._queue_of = queue_of or _default_queue
        self._clock = clock
        self._round = wait_round
        self._reads: dict[str, asyncio.Future[Outcome]] = {}
        """One read loop per key, shared by every waiter on it."""

    async def dispatch(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> bool:
        return await self.ledger.accept(
            _key(assignment.key),
            kind=assignment.kind,
            queue=self._queue_of(assignment),
            assignment=assignment_to_json(assignment),
            now=self._clock(),
        )

    async def run(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> Outcome:
        if not await self.dispatch(assignment, signal=signal, local=local):
            return Cancelled(reason="the effect was aborted before it started")
        body = assignment.body
        self._crash("after_dispatch", body.tool_name if isinstance(body, ToolBody) else None)
        # The run loop tells a running effect to stop with ``cancel`` (after its grace):
        # that writes cancel_requested, and the executor's copy of the signal fires.
        following = self._follow(assignment)
        try:
            return await self.outcome(assignment.key)
        finally:
            if following is not None:
                following.cancel()

    def _follow(self, a: Assignment) -> asyncio.Future[None] | None:
        """A model call's deltas from its executor, fed to a new generation of the owner's
        window while it runs (none without a window, or for a tool)."""
        body = a.body
        if self._progress is None or not isinstance(body, ModelBody):
            return None
        turn = body.request.get("turn_index")
        sink, holes = far_sink(self._progress, a.key.run_id, turn if isinstance(turn, int) else -1)
        return asyncio.ensure_future(Follower(self.ledger, a.key.effect_id, sink, holes).run())

    async def outcome(self, key: AssignmentKey) -> Outcome:
        """Wait for the key to settle and read how (a plain read once it has)."""
        shared = self._reads.get(key.effect_id)
        if shared is None or shared.done():
            shared = self._reads[key.effect_id] = asyncio.ensure_future(self._settled(key))
            shared.add_done_callback(functools.partial(_forget, self._reads, key.effect_id))
        return await asyncio.shield(shared)

    async def _settled(self, key: AssignmentKey) -> Outcome:
        """``_settled_once``, again while the store cannot be reached (a transport error, a
        timeout: every read of the wait, its first included), backing off up to a round; an
        error in what the store holds fails at once. Never an outcome made up: only one
        read from the ledger."""
        delay = 0.05
        while True:
            try:
                return await self._settled_once(key)
            except StoreError as exc:
                if not is_transient(exc):
                    raise
                log.warning(
                    "effect %s: reading its outcome failed (retrying): %s", key.effect_id, exc
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._round)

    async def _settled_once(self, key: AssignmentKey) -> Outcome:
        """Wait for the settle alone (its claim and start wake nobody), then read it: on
        PostgreSQL, with the run's channel heard, one read of the key's mark before the
        notice and one of the outcome after it."""
        while not await self.ledger.wait_settled(key.effect_id, key.run_id, self._round):
            pass
        row = await self.ledger.read(key.effect_id, now=self._clock())
        if row is None:
            raise KeyError(f"effect {key.effect_id} was never dispatched to the ledger")
        if row.phase == "aborted":
            return Cancelled(reason="the effect was aborted before it started")
        if row.outcome is None:  # a settled key always has one
            raise StoreError(f"effect {key.effect_id} is {row.phase} without an outcome")
        return read_outcome(row.outcome, key, repr(row.executor or "(none)"))

    async def attachment(self, key: AssignmentKey) -> Attachment:
        """``attach``, read from the store now (active / orphaned / terminal / missing /
        aborted; orphaned = held by an executor whose lease lapsed)."""
        row = await self.ledger.read(key.effect_id, now=self._clock())
        if row is None:
            return "missing"
        return attachment_of(row.phase, row.lease_live)

    def attach(self, key: AssignmentKey) -> Attachment:
        """The port's synchronous ``attach``: one short blocking read of the store (it is
        asked on recovery paths only); code that can await prefers ``attachment``."""
        row = self.ledger.read_sync(key.effect_id, now=self._clock())
        if row is None:
            return "missing"
        return attachment_of(row.phase, row.lease_live)

    async def abort(self, key: AssignmentKey) -> bool:
        return await self.ledger.abort(_key(key), now=self._clock())

    async def cancel(self, key: AssignmentKey, reason: str) -> None:
        await self.ledger.request_cancel(key.effect_id, reason=reason, now=self._clock())

    async def close(self) -> None:
        """Stop the ledger's watcher and listener, if this executor made the ledger (the
        store stays open: it is the caller's)."""
        if self._owns_ledger:
            await self.ledger.close()

    async def acknowledge(self, key: AssignmentKey) -> bool:
        """The run recorded the key's outcome (``acknowledged``)."""
        return await self.ledger.acknowledge(key.effect_id, now=self._clock())


def _default_queue(a: Assignment) -> str:
    return "default" if isinstance(a.body, ToolBody) else f"model:{a.body.model}"


class RoutingExecutor:
    """Queued tools' calls to the ledger while a pool serves their queue; all else in
    process. Whether a queue is served is read at most once a second per queue."""

    def __init__(
        self,
        local: InProcessExecutor,
        remote: StoreExecutor,
        queues: dict[str, str],
        *,
        model_queue: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.local = local
        self.remote = remote
        self._queues = queues
        """Tool name -> queue, for the tools that name one."""
        self._model_queue = model_queue
        """The queue of the agent's model calls, if it names one."""
        self._clock = clock
        self._served: dict[str, tuple[float, bool]] = {}
        self._where: dict[str, Executor] = {}
        """Effect id -> the executor it went to (for outcome, cancel, attach, abort)."""
        self._unacked: list[AssignmentKey] = []
        """Keys the pool settled and ``run`` returned. The run loop records an outcome
        before it asks for its next effect, so the next ``run`` acknowledges them."""

    @property
    def lease(self) -> HeldLease | None:
        """The drive's lease, under which the calls performed in process run (``Leased``;
        a pool holds each key it performs under a lease of its own)."""
        return self.local.lease

    @lease.setter
    def lease(self, held: HeldLease | None) -> None:
        self.local.lease = held

    async def _acknowledge(self) -> None:
        keys, self._unacked = self._unacked, []
        for key in keys:
            await self.remote.acknowledge(key)

    async def recorded(self) -> None:
        """The drive came to rest: every outcome ``run`` returned is recorded, the last one
        too, which no next effect will acknowledge. Best effort: a store failure here leaves
        a key settled, which loses nothing."""
        if self._unacked:
            with contextlib.suppress(StoreError):
                await self._acknowledge()

    async def _target(self, a: Assignment) -> Executor:
        body = a.body
        queue = (
            self._queues.get(body.tool_name) if isinstance(body, ToolBody) else self._model_queue
        )
        if queue is None:
            return self.local
        now = self._clock()
        seen = self._served.get(queue)
        if seen is None or now - seen[0] > 1.0:
            seen = (now, await self.remote.ledger.serves(queue, now=now))
            self._served[queue] = seen
        return self.remote if seen[1] else self.local

    async def _route(self, assignment: Assignment) -> Executor:
        """Where ``assignment`` goes (remembered by its key), once the keys the pool settled
        for earlier calls are acknowledged."""
        if self._unacked:
            await self._acknowledge()
        target = await self._target(assignment)
        self._where[assignment.key.effect_id] = target
        return target

    async def dispatch(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> bool:
        target = await self._route(assignment)
        return await target.dispatch(assignment, signal=signal, local=local)

    async def run(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> Outcome:
        target = await self._route(assignment)
        k = assignment.key.effect_id
        try:
            outcome = await target.run(assignment, signal=signal, local=local)
        finally:
            self._where.pop(k, None)
        if target is self.remote and outcome.kind != "tool_unknown":
            self._unacked.append(assignment.key)
        return outcome

    async def outcome(self, key: AssignmentKey) -> Outcome:
        return await self._where.get(key.effect_id, self.remote).outcome(key)

    async def acknowledge(self, key: AssignmentKey) -> bool:
        """A key of the ledger (a previous owner's, kept at a takeover) is recorded."""
        return await self.remote.acknowledge(key)

    def attach(self, key: AssignmentKey) -> Attachment:
        # A key not dispatched from here may be a previous owner's, in the ledger.
        if self._where.get(key.effect_id) is self.local:
            return self.local.attach(key)
        return self.remote.attach(key)

    async def attachment(self, key: AssignmentKey) -> Attachment:
        """Where the key is known: here, else the ledger."""
        if key.effect_id in self._where and self._where[key.effect_id] is self.local:
            return self.local.attach(key)
        return await self.remote.attachment(key)

    async def abort(self, key: AssignmentKey) -> bool:
        # A key never dispatched from here may be in the ledger (a previous owner's).
        return await self._where.get(key.effect_id, self.remote).abort(key)

    async def cancel(self, key: AssignmentKey, reason: str) -> None:
        target = self._where.get(key.effect_id)
        if target is not None:
            await target.cancel(key, reason)


def routed(
    local: InProcessExecutor,
    tools: object,
    store: object,
    ledgers: dict[int, Ledger],
    model_queue: str | None = None,
    crash: CrashHook = _crash.point,
) -> Executor:
    """``local`` itself when no tool (and not the model) names a queue: the in-process path
    unchanged; else a ``RoutingExecutor`` on the store's ledger (one per store, in
    ``ledgers``)."""
    queues = {t.name: t.queue for t in tools if getattr(t, "queue", None)}  # type: ignore[attr-defined]
    if not queues and model_queue is None:
        return local
    ledger = ledgers.get(id(store))
    if ledger is None:
        ledger = ledgers[id(store)] = ledger_for(store)
    remote = StoreExecutor(
        store,
        queue_of=lambda a: _queue(a, queues, model_queue),
        ledger=ledger,
        crash=crash,
        progress=local._progress,
    )
    return RoutingExecutor(local, remote, queues, model_queue=model_queue)


def _queue(a: Assignment, queues: dict[str, str], model_queue: str | None) -> str:
    body = a.body
    if isinstance(body, ToolBody):
        return queues.get(body.tool_name, "default")
    return model_queue or f"model:{body.model}"
