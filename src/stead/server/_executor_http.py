"""An executor behind HTTP, so a sandbox that runs tools needs no database credentials.

``executor_app(executor, tokens)`` serves any ``Executor`` (the in-process one in a sandbox,
with the tool registry and providers it has) over HTTP; ``HttpExecutor(url, token)`` is the
``Executor`` port on the owner's side, for ``Runtime(executor_factory=...)``. The wire:

* ``POST /v1/effects`` with an assignment (``stead.core.effects.assignment_to_json``):
  202 accepted (or already accepted: dispatch is idempotent by key), 409 the key is aborted,
  400 a malformed assignment (its ``kind`` and body disagree, a field is wrong), 503 the
  executor could not take it.
* ``GET /v1/effects/{session}/{run}/{effect}/outcome``: 200 the outcome, 204 not settled yet,
  404 a key never dispatched here, 410 aborted.
* ``GET /v1/effects/{...}``: the attachment; ``POST /v1/effects/{...}/abort`` and ``/cancel``.
* Every request carries ``Authorization: Bearer TOKEN``, else 401.
* The owner's lease: ``Stead-Lease: FENCING_TOKEN SECONDS_LEFT`` on each request of a drive
  that holds one. A dispatch gives the key a lease of its own on the far side (its tools'
  ``ctx.fencing_token``, ``ctx.aborted``, ``ctx.lease_lost()``), trusted for the seconds the
  owner had left; every later request about the key (the outcome polls) moves that deadline
  on, and one that carries a lower token than the key's (a stale owner's) moves nothing.
  When the owner falls silent (paused, dead, cut off) the key's deadline passes as the
  owner's own does, later only by the request's transit: the effect's signal fires (as a
  cancel: ``ctx.aborted``, process groups SIGTERM then SIGKILL), as in an executor pool.

The owner side retries a dispatch whose answer was lost (a dropped connection, a 503) with
the same body, and gets the same acceptance; an outcome is polled and, once read, kept by the
server, so a second read (after a lost answer) gets it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from stead._lease import HeldLease
from stead._signal import AbortSignal
from stead.core.effects import (
    AssignmentKey,
    Cancelled,
    ModelBody,
    Outcome,
    assignment_from_json,
    assignment_to_json,
)
from stead.core.progress import Cursor, ProgressSink, ProgressWindow
from stead.errors import DispatchRejected, UserError
from stead.runtime import Agent, Executor, InProcessExecutor
from stead.runtime.agent import check_deps
from stead.runtime.executors import far_sink, outcome_to_json, read_outcome
from stead.server._security import check_bind, who

# -- the server ----------------------------------------------------------------------------


def executor_app(
    executor: Executor, tokens: Mapping[str, str], progress: ProgressWindow | None = None
) -> Starlette:
    """``executor`` over HTTP; ``tokens`` maps each bearer secret to its holder's name;
    ``progress``: the window its model calls stream into, read at ``.../progress``."""
    settled: dict[str, Outcome] = {}
    signals: dict[str, AbortSignal] = {}
    leases: dict[str, HeldLease] = {}
    """Each key's lease, as its owner last vouched for it (``Stead-Lease``)."""
    held_here = executor.leases if isinstance(executor, InProcessExecutor) else {}

    def key_of(request: Request) -> AssignmentKey:
        p = request.path_params
        return AssignmentKey(session_id=p["session"], run_id=p["run"], effect_id=p["effect"])

    def guarded(handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            if who(tokens, request.headers.get("authorization")) is None:
                return JSONResponse({"error": "a bearer token is required"}, status_code=401)
            result: Response = await handler(request)
            return result

        return endpoint

    def vouched(request: Request, k: str, signal: AbortSignal | None = None) -> None:
        """The owner's word on its lease: at a dispatch (``signal``) the key's lease begins
        with it; later it moves the key's deadline on, unless its token is stale."""
        try:
            token, left = _lease_word(request.headers.get(LEASE_HEADER))
        except ValueError:
            return  # no word, or one that cannot be read: nothing is vouched for
        until = time.monotonic() + left
        held = leases.get(k)
        if held is not None:
            if token >= held.token:
                held.token = token  # a new owner that kept the key (it found it active)
                held.trust_until(until)
        elif signal is not None:
            held = leases[k] = held_here[k] = HeldLease(
                token=token, ttl=left, margin=0.0, sent_at=until - left
            )
            held.lost.add_callback(signal.abort)
            held.arm()

    def forget(k: str) -> None:
        held = leases.pop(k, None)
        if held is not None:
            held.close()
            held_here.pop(k, None)

    async def attachment(key: AssignmentKey) -> str:
        if key.effect_id in settled:
            return "terminal"
        answer: Any = executor.attach(key)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return str(answer)

    async def dispatch(request: Request) -> Response:
        try:
            assignment = assignment_from_json(await request.json())
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        k = assignment.key.effect_id
        signal = signals.setdefault(k, AbortSignal())
        vouched(request, k, signal)  # before the effect starts: its tool reads the lease
        try:
            accepted = await executor.dispatch(assignment, signal=signal)
        except DispatchRejected as exc:  # for good, unless it says it may take it back
            forget(k)
            status = 503 if exc.retryable else 422
            return JSONResponse({"error": str(exc)}, status_code=status)
        except Exception as exc:
            forget(k)
            return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=503)
        if not accepted:
            forget(k)
            return JSONResponse({"error": "the key is aborted"}, status_code=409)
        return JSONResponse({"accepted": True, "effect_id": k}, status_code=202)

    async def outcome(request: Request) -> Response:
        key = key_of(request)
        vouched(request, key.effect_id)
        state = await attachment(key)
        if state == "aborted":
            return JSONResponse({"error": "the key is aborted"}, status_code=410)
        if state == "missing":
            return JSONResponse({"error": "no such effect here"}, status_code=404)
        if state != "terminal":
            return Response(status_code=204)
        if key.effect_id not in settled:
            settled[key.effect_id] = await executor.outcome(key)
            signals.pop(key.effect_id, None)
            forget(key.effect_id)
        return JSONResponse(outcome_to_json(settled[key.effect_id]))

    async def attach(request: Request) -> Response:
        key = key_of(request)
        vouched(request, key.effect_id)
        return JSONResponse({"attachment": await attachment(key)})

    async def abort(request: Request) -> Response:
        key = key_of(request)
        if key.effect_id in settled:  # accepted (and settled): never also aborted
            return JSONResponse({"aborted": False})
        return JSONResponse({"aborted": await executor.abort(key)})

    async def cancel(request: Request) -> Response:
        body = await request.json() if await request.body() else {}
        reason = body.get("reason", "cancelled") if isinstance(body, dict) else "cancelled"
        await executor.cancel(key_of(request), str(reason))
        return Response(status_code=202)

    async def frames(request: Request) -> Response:
        """A run's streamed text after ``?generation=G&sequence=S`` (progress from afar)."""
        q = request.query_params
        try:
            cursor = Cursor(int(q.get("generation", "0")), int(q.get("sequence", "-1")))
        except ValueError:
            return JSONResponse({"error": "generation and sequence are integers"}, 400)
        if progress is None:
            return JSONResponse({"frames": [], "reset": False, "gap": False})
        got = progress.read(request.path_params["run"], cursor)
        return JSONResponse(
            {
                "frames": [[f.generation, f.sequence, f.text] for f in got.frames],
                "reset": got.reset,
                "gap": got.gap,
            }
        )

    one = "/v1/effects/{session}/{run}/{effect}"
    return Starlette(
        routes=[
            Route("/v1/effects", guarded(dispatch), methods=["POST"]),
            Route(one, guarded(attach), methods=["GET"]),
            Route(one + "/outcome", guarded(outcome), methods=["GET"]),
            Route(one + "/abort", guarded(abort), methods=["POST"]),
            Route(one + "/cancel", guarded(cancel), methods=["POST"]),
            Route(one + "/progress", guarded(frames), methods=["GET"]),
        ]
    )


# -- the owner's side ----------------------------------------------------------------------


class HttpExecutor:
    """The ``Executor`` port over HTTP (``executor_app`` on the other side). Its ``missing``
    proves nothing (the far executor may be a process that restarted), so it is not
    ``authoritative``."""

    authoritative = False

    def __init__(
        self,
        url: str,
        token: str,
        *,
        poll: float = 0.05,
        retries: int = 5,
        client: httpx.AsyncClient | None = None,
        progress: ProgressSink | None = None,
    ) -> None:
        """``progress``: where a model call's streamed text goes while it runs far away
        (the owner's window; read from the far side every 50 ms)."""
        self._progress = progress
        self.missed = 0
        """Frames the far side's window evicted before they were read (holes)."""
        self._client = client or httpx.AsyncClient(
            base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=30
        )
        self._poll, self._retries = poll, retries
        self._last: dict[str, str] = {}
        self._where = url
        self.lease: HeldLease | None = None
        """The lease of the drive this executor serves (set by the drive): vouched for on
        every request, so the far side's tools hold the key under it (``Stead-Lease``)."""

    @staticmethod
    def _path(key: AssignmentKey) -> str:
        return f"/v1/effects/{key.session_id or '-'}/{key.run_id}/{key.effect_id}"

    async def _send(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One request, tried again (same body) when its answer is lost or the far side is
        unavailable: every request of the wire is idempotent by key."""
        for attempt in range(self._retries + 1):
            lease = self.lease
            if lease is not None:  # read at each send: what is left now
                kw["headers"] = {LEASE_HEADER: f"{lease.token} {max(0.0, lease.left()):.3f}"}
            try:
                r = await self._client.request(method, path, **kw)
            except httpx.TransportError:
                if attempt == self._retries:
                    raise
            else:
                if r.status_code != 503 or attempt == self._retries:
                    if r.status_code == 401:
                        raise PermissionError("the executor refused the bearer token")
                    return r
            await asyncio.sleep(self._poll * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    async def dispatch(self, assignment: Any, *, signal: AbortSignal, local: object = None) -> bool:
        """Accept the assignment far away; False if its key is aborted there."""
        data = assignment_to_json(assignment)
        key = data["key"]
        if isinstance(key, dict) and not key.get("session_id"):
            data = {**data, "key": {**key, "session_id": "-"}}
        r = await self._send("POST", "/v1/effects", json=data)
        if r.status_code == 409:
            return False
        if r.status_code in (400, 422):  # refused as described: so would every attempt be
            raise DispatchRejected(f"executor at {self._where}: {_error_text(r)}")
        if r.status_code != 202:
            raise ConnectionError(f"dispatch answered {r.status_code}: {r.text[:200]}")
        return True  # an abort of the run reaches it as ``cancel`` (the run loop's)

    async def outcome(self, key: AssignmentKey) -> Outcome:
        """Poll until the effect settles."""
        while True:
            r = await self._send("GET", self._path(key) + "/outcome")
            if r.status_code == 200:
                try:
                    body = r.json()
                except ValueError:
                    body = None  # not JSON at all: as malformed as any other non-outcome
                return read_outcome(body, key, repr(str(self._client.base_url)))
            if r.status_code == 410:
                return Cancelled(reason="the effect was aborted before it started")
            if r.status_code == 404:
                raise KeyError(f"effect {key.effect_id} was never dispatched there")
            await asyncio.sleep(self._poll)

    async def run(self, assignment: Any, *, signal: AbortSignal, local: object = None) -> Outcome:
        """``dispatch`` then ``outcome`` (a model call's text streamed meanwhile)."""
        if not await self.dispatch(assignment, signal=signal):
            return Cancelled(reason="the effect was aborted before it started")
        body = assignment.body
        if self._progress is None or not isinstance(body, ModelBody):
            return await self.outcome(assignment.key)
        turn = body.request.get("turn_index")
        run_id = assignment.key.run_id
        sink, holes = far_sink(self._progress, run_id, turn if isinstance(turn, int) else -1)
        following = asyncio.ensure_future(self._follow(assignment.key, sink, holes))
        try:
            return await self.outcome(assignment.key)
        finally:
            following.cancel()

    async def _follow(
        self, key: AssignmentKey, sink: Callable[[str], None], holes: Callable[[int], None]
    ) -> None:
        """Feed the far window's frames of the call to ``sink`` until cancelled (lossy: a
        failed read is skipped; frames the far window evicted are ``holes``)."""
        generation, sequence = 0, -1
        while True:
            await asyncio.sleep(0.05)
            params = {"generation": generation, "sequence": sequence}
            try:
                r = await self._client.get(self._path(key) + "/progress", params=params)
                got = r.json() if r.status_code == 200 else {}
            except (httpx.HTTPError, ValueError):
                continue
            for frame in got.get("frames", ()):
                lost = frame[1] - (sequence + 1 if frame[0] == generation else 0)
                if lost > 0:
                    self.missed += lost
                    holes(lost)
                generation, sequence, text = frame
                with contextlib.suppress(Exception):  # a listener's failure is the window's
                    sink(text)

    async def attach(self, key: AssignmentKey) -> str:
        """What the far executor holds for ``key``."""
        r = await self._send("GET", self._path(key))
        return str(r.json()["attachment"])

    async def abort(self, key: AssignmentKey) -> bool:
        """Tombstone ``key`` far away; False if it was accepted there first."""
        r = await self._send("POST", self._path(key) + "/abort")
        return bool(r.json()["aborted"])

    async def cancel(self, key: AssignmentKey, reason: str) -> None:
        """Ask the far executor to stop the effect."""
        await self._send("POST", self._path(key) + "/cancel", json={"reason": reason})

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


# -- serving -----------------------------------------------------------------------------------


async def serve_executor(
    agents: Iterable[Agent],
    *,
    tokens: Mapping[str, str],
    host: str = "127.0.0.1",
    port: int = 8100,
    ready: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
    deps: Any = None,
) -> None:
    """Serve the agents' models and tools as one in-process executor over HTTP until ``stop``
    is set (for ``stead executor serve``): the process needs no store, only the code. A token
    is required, always: whoever holds it runs the tools. ``deps``: what its tools read as
    ``ctx.deps`` (this process's, checked against the agent's ``deps_type``)."""
    import uvicorn

    from stead.server._serve import _Server

    if not tokens:
        raise UserError("an executor behind HTTP needs a token: pass --token NAME:SECRET")
    check_bind(host, tokens)
    executors = {a.name: a for a in agents}
    if len(executors) != 1:
        raise UserError("an executor behind HTTP serves one agent's model and tools: name one")
    (agent,) = executors.values()
    check_deps(agent, deps)
    window = ProgressWindow()
    executor = InProcessExecutor(
        agent.model, agent.registry, window, deps=deps, max_result=agent.limits.max_tool_result
    )
    app = executor_app(executor, tokens, window)
    config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_level="warning")
    server = _Server(config)  # no signal handling of its own: ``stop`` ends it
    task = asyncio.ensure_future(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()  # the bind failed: say why
                return
            await asyncio.sleep(0.02)
        if ready is not None:
            ready(server.servers[0].sockets[0].getsockname()[1])
        waiter = asyncio.ensure_future((stop or asyncio.Event()).wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    finally:
        server.should_exit = True
        await asyncio.gather(task, return_exceptions=True)


LEASE_HEADER = "stead-lease"


def _lease_word(value: str | None) -> tuple[int, float]:
    """``Stead-Lease``'s fencing token and seconds left; ``ValueError`` if absent or bad."""
    if value is None:
        raise ValueError("no lease")
    token, left = value.split()
    seconds = float(left)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds left must be finite and not negative: {left!r}")
    return int(token), seconds


def _error_text(r: httpx.Response) -> str:
    """The ``error`` of an error answer's JSON, else its first 200 characters."""
    try:
        body = r.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, str) else f"{r.status_code} {r.text[:200]}"
