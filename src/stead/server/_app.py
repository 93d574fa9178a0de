"""The HTTP API and the dashboard, as one ASGI app over a ``Runtime``.

Each route parses its request, calls one ``Runtime`` method and shapes the answer; the
runtime decides everything. Its errors keep their messages and map to statuses:

    RunNotFound 404 · ApprovalError 409 · UnknownAgent 422 · other UserError 400
    Conflict / LeaseHeld / Fenced / IllegalTransition 409 · StoreError 503

Runs are driven by workers (``stead worker``, or the one ``stead serve --worker`` runs in this
process), never inside a request: creating, approving or resuming a run makes it claimable
and returns at once.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import AsyncIterator
from importlib import resources
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Path, Query, Request
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles

from stead.core.events import AssistantMessageRecorded, encode
from stead.core.fold import RunState, apply
from stead.core.messages import Usage, message_to_json
from stead.core.pricing import PriceTable
from stead.core.progress import ProgressRead
from stead.core.states import FINISHED, TRANSITIONS, RunStatus, mermaid
from stead.errors import (
    ApprovalError,
    Conflict,
    Fenced,
    IllegalTransition,
    RunNotFound,
    SteadError,
    StoreError,
    UnknownAgent,
    UserError,
)
from stead.runtime import Runtime, RunView
from stead.server._models import (
    AgentOut,
    Answer,
    ApprovalOut,
    Approve,
    CreateRun,
    Deny,
    ErrorOut,
    EventOut,
    Health,
    MessageOut,
    RunDetail,
    RunId,
    RunPage,
    RunSummary,
    StatesOut,
    Steer,
    ToolOut,
    UsageOut,
)
from stead.server._security import BodyLimit, who
from stead.store import RunRecord, StoredEvent

log = logging.getLogger("stead.server")

_STATUS: list[tuple[type[SteadError], int]] = [
    (RunNotFound, 404),
    (ApprovalError, 409),
    (UnknownAgent, 422),
    (UserError, 400),
    (Conflict, 409),
    (Fenced, 409),
    (IllegalTransition, 409),
    (StoreError, 503),
]

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": what}
    for code, what in (
        (400, "a caller's mistake; the message says what to do"),
        (401, "no valid bearer token"),
        (404, "no such run"),
        (409, "no such pending approval, or the run changed under the request"),
        (413, "request body too large"),
        (503, "the store failed; try again"),
    )
}

_STATIC = resources.files("stead.server") / "static"

_bearer = HTTPBearer(auto_error=False, description="a token given to `stead serve`")


class _Unauthorized(Exception):
    """No valid bearer token on a route that needs one."""


async def _caller(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The name of the caller's token; 401 without a valid one."""
    name = who(request.app.state.tokens, request.headers.get("authorization"))
    if name is None:
        raise _Unauthorized()
    return name


Caller = Annotated[str, Depends(_caller)]
RunPath = Annotated[RunId, Path(description="the run's id")]
CallPath = Annotated[str, Path(max_length=256, description="the pending call's id")]


def status_of(exc: SteadError) -> int:
    """The HTTP status for a stead error (the first matching class in ``_STATUS``)."""
    for cls, code in _STATUS:
        if isinstance(exc, cls):
            return code
    return 500


def create_app(
    runtime: Runtime,
    tokens: dict[str, str],
    *,
    max_body: int = 64 * 1024,
    heartbeat: float = 15.0,
) -> FastAPI:
    """The ASGI app. ``tokens`` maps each bearer secret to its name (who decided)."""
    rt = runtime
    app = FastAPI(
        title="stead",
        version="0.1.0",
        summary="See and steer durable agent runs.",
        responses=_ERRORS,
        docs_url=None,
        redoc_url=None,
    )
    app.state.tokens = tokens

    @app.exception_handler(_Unauthorized)
    async def unauthorized(request: Request, exc: _Unauthorized) -> JSONResponse:
        return JSONResponse(
            {"error": "Unauthorized", "detail": "send Authorization: Bearer <token>"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    @app.exception_handler(SteadError)
    async def stead_error(request: Request, exc: SteadError) -> JSONResponse:
        code = status_of(exc)
        if code >= 500:
            log.warning("%s %s failed: %s", request.method, request.url.path, exc)
        return JSONResponse({"error": type(exc).__name__, "detail": str(exc)}, status_code=code)

    # -- reading ---------------------------------------------------------------------------

    @app.get("/health", response_model=Health, tags=["meta"])
    async def health() -> Health:
        """The process answers. Needs no token."""
        return Health(ok=True)

    @app.get("/agents", response_model=list[AgentOut], tags=["meta"])
    async def agents(_: Caller) -> list[AgentOut]:
        """The agents this server can start runs of, with their tools' schemas."""
        return [
            AgentOut(
                name=a.name,
                model=a.model.model_name,
                tools=[
                    ToolOut(
                        name=t.name,
                        description=t.description,
                        effect_class=str(t.effect_class),
                        parameters=t.parameters,
                        requires_approval=bool(t.requires_approval),
                    )
                    for t in a.registry
                ],
            )
            for a in rt.agents.values()
        ]

    @app.get("/states", response_model=StatesOut, tags=["meta"])
    async def states(_: Caller) -> StatesOut:
        """The run state machine the dashboard draws."""
        return StatesOut(
            states=list(RunStatus),
            transitions=[(a, b) for a, targets in TRANSITIONS.items() for b in sorted(targets)],
            finished=sorted(FINISHED),
            mermaid=mermaid(),
        )

    @app.get("/runs", response_model=RunPage, tags=["runs"])
    async def list_runs(
        _: Caller,
        status: RunStatus | None = None,
        agent: Annotated[str | None, Query(max_length=200)] = None,
        cursor: Annotated[str | None, Query(max_length=400)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
    ) -> RunPage:
        """Runs, most recently updated first; filter by status and agent; page by cursor."""
        records = await rt.list_runs(
            status=status.value if status else None,
            agent=agent,
            before=_decode_cursor(cursor),
            limit=limit + 1,
        )
        page = records[:limit]
        rows = [await _summary(r) for r in page]
        more = len(records) > limit
        return RunPage(runs=rows, next_cursor=_encode_cursor(page[-1]) if more else None)

    @app.get("/runs/{run_id}", response_model=RunDetail, tags=["runs"])
    async def get_run(run_id: RunPath, _: Caller) -> RunDetail:
        """One run: outcome, usage, pending approvals (no tokens) and its path of states."""
        return await _detail(run_id)

    @app.get(
        "/runs/{run_id}/events",
        response_model=list[EventOut],
        tags=["runs"],
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def events(
        run_id: RunPath,
        _: Caller,
        request: Request,
        after: Annotated[int, Query(ge=0)] = 0,
        last_event_id: Annotated[str | None, Header(max_length=40)] = None,
    ) -> Any:
        """The run's log after ``after``. With ``Accept: text/event-stream``: a live stream
        of durable events (``id`` = seq; reconnect with ``Last-Event-ID``), provisional text
        (``event: progress``) and heartbeats, ending after a finished run's last event."""
        if last_event_id is not None:
            if not last_event_id.strip().isdigit():
                raise UserError("Last-Event-ID must be the seq of the last event received")
            after = int(last_event_id)
        if "text/event-stream" not in request.headers.get("accept", ""):
            record = await rt.store.get_run(run_id)
            prices = _prices(record.agent)
            return [_event(e, prices) for e in await rt.events(run_id, after)]
        record = await rt.store.get_run(run_id)
        return StreamingResponse(
            _sse(run_id, after, _prices(record.agent)),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @app.get("/runs/{run_id}/messages", response_model=list[MessageOut], tags=["runs"])
    async def messages(run_id: RunPath, _: Caller) -> list[MessageOut]:
        """The conversation as the model sees it now."""
        state = await rt.state(run_id)
        out = []
        for m in state.conversation():
            data = message_to_json(m)
            out.append(MessageOut(role=str(data.get("role")), data=data))
        return out

    @app.get("/approvals", response_model=list[ApprovalOut], tags=["approvals"])
    async def approvals(
        _: Caller, agent: Annotated[str | None, Query(max_length=200)] = None
    ) -> list[ApprovalOut]:
        """The inbox: every call waiting on a person, oldest run first. No tokens."""
        records = await rt.list_runs(status=RunStatus.AWAITING_APPROVAL, agent=agent, limit=500)
        out: list[ApprovalOut] = []
        for r in reversed(records):
            out.extend(_approvals(await rt.state(r.run_id)))
        return out

    # -- steering --------------------------------------------------------------------------

    @app.post("/runs", response_model=RunDetail, status_code=201, tags=["runs"])
    async def create(body: CreateRun, _: Caller) -> RunDetail:
        """Queue a run of a registered agent; a worker picks it up."""
        run_id = await rt.start(
            body.agent,
            body.input,
            run_id=body.run_id,
            session_id=body.session_id,
            correlation_id=body.correlation_id,
        )
        return await _detail(run_id)

    @app.post(
        "/runs/{run_id}/approvals/{call_id}/approve", response_model=RunDetail, tags=["approvals"]
    )
    async def approve(run_id: RunPath, call_id: CallPath, body: Approve, by: Caller) -> RunDetail:
        """Approve a gated call, optionally with edited arguments; recorded as the token's
        name. A worker then runs the call."""
        await rt.approve(
            run_id,
            call_id,
            token=body.token,
            reason=body.reason,
            arguments=body.arguments,
            by=by,
        )
        return await _detail(run_id)

    @app.post(
        "/runs/{run_id}/approvals/{call_id}/deny", response_model=RunDetail, tags=["approvals"]
    )
    async def deny(run_id: RunPath, call_id: CallPath, body: Deny, by: Caller) -> RunDetail:
        """Deny a gated call; the model reads the reason as the call's error result."""
        await rt.deny(run_id, call_id, body.reason, token=body.token, by=by)
        return await _detail(run_id)

    @app.post(
        "/runs/{run_id}/approvals/{call_id}/answer", response_model=RunDetail, tags=["approvals"]
    )
    async def answer(run_id: RunPath, call_id: CallPath, body: Answer, by: Caller) -> RunDetail:
        """Say whether a call whose outcome is unknown happened (with its result), did not
        (it may run again), or should be skipped."""
        await rt.decide(
            run_id,
            call_id,
            body.decision,
            token=body.token,
            result=body.result,
            reason=body.reason,
            by=by,
        )
        return await _detail(run_id)

    @app.post("/runs/{run_id}/cancel", response_model=RunDetail, tags=["runs"])
    async def cancel(run_id: RunPath, body: Steer, by: Caller) -> RunDetail:
        """Cancel a run: its owner stops the model and the tools' process groups."""
        await rt.cancel(run_id, body.reason or f"cancelled by {by}", by=by)
        return await _detail(run_id)

    @app.post("/runs/{run_id}/resume", response_model=RunDetail, tags=["runs"])
    async def resume(run_id: RunPath, body: Steer, by: Caller) -> RunDetail:
        """Send a failed, cancelled or timed-out run back to the queue for a worker."""
        await rt.requeue(run_id, body.reason or f"resumed by {by}")
        return await _detail(run_id)

    # -- the dashboard (static files: no data in them, so no token) ------------------------

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(str(_STATIC / "index.html"), headers={"Cache-Control": "no-store"})

    app.mount("/static", StaticFiles(directory=str(_STATIC)), name="static")
    app.add_middleware(BodyLimit, limit=max_body)

    # -- shaping ---------------------------------------------------------------------------

    def _prices(agent: str) -> PriceTable:
        known = rt.agents.get(agent)
        return known.prices if known is not None else _DEFAULT_PRICES

    def _cost(agent: str, usage: Usage) -> float | None:
        known = rt.agents.get(agent)
        if known is None:
            return None
        return known.prices.cost(usage, known.model.model_name)

    async def _summary(record: RunRecord) -> RunSummary:
        view = await rt.get(record.run_id)
        return RunSummary(**_summary_fields(record, view))

    def _summary_fields(record: RunRecord, view: RunView) -> dict[str, Any]:
        return {
            "run_id": record.run_id,
            "agent": record.agent,
            "status": view.status,
            "session_id": record.session_id,
            "correlation_id": record.correlation_id,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
            "seq": view.seq,
            "turns": view.turns,
            "usage": _usage(view.usage),
            "cost_usd": _cost(record.agent, view.usage),
            "leased_by": record.lease_owner
            if (record.lease_expires_at or 0) > rt.clock()
            else None,
        }

    async def _detail(run_id: str) -> RunDetail:
        record = await rt.store.get_run(run_id)
        log_events = await rt.events(run_id)
        path: list[RunStatus] = []
        state = RunState()
        for stored in log_events:
            apply(state, stored.event)
            if state.status is not None and (not path or path[-1] is not state.status):
                path.append(state.status)
        view = RunView.of(state)
        return RunDetail(
            **_summary_fields(record, view),
            input=state.input,
            output=view.output,
            stop_reason=view.stop_reason,
            error=view.error,
            approvals=_approvals(state),
            path=path,
        )

    def _approvals(state: RunState) -> list[ApprovalOut]:
        agent = rt.agents.get(state.agent)
        out = []
        for a in state.approvals.values():
            call = state.calls[a.tool_call_id]
            tool = agent.registry.get(call.name) if agent else None
            out.append(
                ApprovalOut(
                    run_id=state.run_id,
                    agent=state.agent,
                    tool_call_id=a.tool_call_id,
                    tool=call.name,
                    reason=a.reason,
                    payload=dict(a.payload or {}),
                    arguments=call.arguments,
                    effect_class=str(call.effect_class) if call.effect_class else None,
                    parameters=tool.parameters if tool else None,
                    deadline=a.deadline,
                    turn_index=a.turn_index,
                )
            )
        return out

    async def _sse(run_id: str, after: int, prices: PriceTable) -> AsyncIterator[str]:
        yield "retry: 1000\n\n"
        async for item in rt.follow(run_id, after, heartbeat=heartbeat):
            if item is None:
                yield ": heartbeat\n\n"
            elif isinstance(item, ProgressRead):
                yield f"event: progress\ndata: {json.dumps(_progress(item))}\n\n"
            else:
                data = _event(item, prices).model_dump_json()
                yield f"id: {item.seq}\nevent: event\ndata: {data}\n\n"
        yield "event: end\ndata: {}\n\n"

    from stead.server._answer import add_answer_route  # issue 12: a question's answer

    add_answer_route(app, rt, _detail)
    return app


_DEFAULT_PRICES = PriceTable()


def _usage(u: Usage) -> UsageOut:
    return UsageOut(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_creation_input_tokens=u.cache_creation_input_tokens,
        cache_read_input_tokens=u.cache_read_input_tokens,
    )


def _event(stored: StoredEvent, prices: PriceTable) -> EventOut:
    kind, version, data = encode(stored.event)
    if kind == "approval_requested":
        data.pop("token", None)  # single-use approval tokens never leave the store
    cost = None
    e = stored.event
    if isinstance(e, AssistantMessageRecorded):
        cost = prices.cost(e.usage, e.model)
    return EventOut(
        seq=stored.seq, kind=kind, v=version, at=stored.created_at, data=data, cost_usd=cost
    )


def _progress(read: ProgressRead) -> dict[str, Any]:
    frames = read.frames
    return {
        "turn_index": frames[0].turn_index if frames else None,
        "generation": read.cursor.generation,
        "first_sequence": frames[0].sequence if frames else None,
        "sequence": read.cursor.sequence,
        "text": "".join(f.text for f in frames),
        "reset": read.reset,
        "gap": read.gap,
    }


def _decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    if cursor is None:
        return None
    try:
        updated, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return float(updated), str(run_id)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise UserError("cursor is not one this server gave; start again without it") from exc


def _encode_cursor(record: RunRecord) -> str:
    raw = json.dumps([record.updated_at, record.run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode()
