"""The API's reading routes: the agents, the state machine, runs, their events (or their
live stream), their conversation, and the approvals inbox."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from stead.core.messages import message_to_json
from stead.core.states import FINISHED, TRANSITIONS, RunStatus, mermaid
from stead.errors import CorruptEvent, IllegalTransition, UserError
from stead.server import _shape as shape
from stead.server._deps import Caller, Rt, RunPath
from stead.server._models import (
    MAX_INT,
    AgentOut,
    ApprovalOut,
    EventOut,
    Health,
    MessageOut,
    RunDetail,
    RunPage,
    StatesOut,
    ToolOut,
)
from stead.store import RunQuery

router = APIRouter()
log = logging.getLogger("stead.server")


@router.get("/health", response_model=Health, tags=["meta"])
async def health() -> Health:
    """The process answers. Needs no token."""
    return Health(ok=True)


@router.get("/agents", response_model=list[AgentOut], tags=["meta"])
async def agents(_: Caller, rt: Rt) -> list[AgentOut]:
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


@router.get("/states", response_model=StatesOut, tags=["meta"])
async def states(_: Caller) -> StatesOut:
    """The run state machine the dashboard draws."""
    return StatesOut(
        states=list(RunStatus),
        transitions=[(a, b) for a, targets in TRANSITIONS.items() for b in sorted(targets)],
        finished=sorted(FINISHED),
        mermaid=mermaid(),
    )


@router.get("/runs", response_model=RunPage, tags=["runs"])
async def list_runs(
    request: Request,
    _: Caller,
    rt: Rt,
    status: RunStatus | None = None,
    agent: Annotated[str | None, Query(max_length=200)] = None,
    q: Annotated[
        str,
        Query(
            max_length=200,
            description="a run id prefix, a conversation id, or words of the input or output",
        ),
    ] = "",
    created_from: Annotated[float | None, Query(ge=0, le=1e11)] = None,
    created_until: Annotated[float | None, Query(ge=0, le=1e11)] = None,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> RunPage:
    """Runs, most recently updated first; filter by status, agent, creation time (seconds
    since the epoch) and text; page by cursor."""
    records = await rt.find_runs(
        RunQuery(
            status=status.value if status else None,
            agent=agent,
            text=shape.text_query(q),
            created_from=created_from,
            created_until=created_until,
            before=shape.decode_cursor(cursor),
            limit=limit + 1,
        )
    )
    page = records[:limit]
    waits: shape.Waits = request.app.state.waits
    rows = [await shape.summary(rt, r, waits) for r in page]
    more = len(records) > limit
    return RunPage(runs=rows, next_cursor=shape.encode_cursor(page[-1]) if more else None)


@router.get("/runs/{run_id}", response_model=RunDetail, tags=["runs"])
async def get_run(run_id: RunPath, _: Caller, rt: Rt) -> RunDetail:
    """One run: outcome, usage, pending approvals (no tokens) and its path of states."""
    return await shape.detail(rt, run_id)


@router.get(
    "/runs/{run_id}/events",
    response_model=list[EventOut],
    tags=["runs"],
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    run_id: RunPath,
    _: Caller,
    rt: Rt,
    request: Request,
    after: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
    last_event_id: Annotated[str | None, Header(max_length=40)] = None,
) -> Any:
    """The run's log after ``after``. With ``Accept: text/event-stream``: a live stream
    of durable events (``id`` = seq; reconnect with ``Last-Event-ID``), provisional text
    (``event: progress``) and heartbeats, ending after a finished run's last event. An
    ``after`` or ``Last-Event-ID`` beyond the run's last event is a 400: it was not given
    by this run's log."""
    if last_event_id is not None:
        after = shape.last_event_id(last_event_id)
    record = await rt.store.get_run(run_id)
    if after > record.last_seq:
        given = "Last-Event-ID" if last_event_id is not None else "after"
        raise UserError(
            f"{given} {after} is beyond the run's log (its last event is {record.last_seq}); "
            "reconnect without it to read the log from the start"
        )
    table = shape.prices(rt, record.agent)
    if "text/event-stream" not in request.headers.get("accept", ""):
        return [shape.event(e, table) for e in await rt.events(run_id, after)]
    return StreamingResponse(
        shape.sse(rt, run_id, after, table, request.app.state.heartbeat),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.get("/runs/{run_id}/messages", response_model=list[MessageOut], tags=["runs"])
async def messages(run_id: RunPath, _: Caller, rt: Rt) -> list[MessageOut]:
    """The conversation as the model sees it now."""
    state = await rt.state(run_id)
    out = []
    for m in state.conversation():
        data = message_to_json(m)
        out.append(MessageOut(role=str(data.get("role")), data=data))
    return out


@router.get("/approvals", response_model=list[ApprovalOut], tags=["approvals"])
async def approvals(
    _: Caller, rt: Rt, agent: Annotated[str | None, Query(max_length=200)] = None
) -> list[ApprovalOut]:
    """The inbox: every call waiting on a person, oldest run first. No tokens."""
    records = await rt.list_runs(status=RunStatus.AWAITING_APPROVAL, agent=agent, limit=500)
    out: list[ApprovalOut] = []
    for r in reversed(records):
        try:
            state = await rt.state(r.run_id)
        except (CorruptEvent, IllegalTransition) as why:  # the list shows it, marked damaged
            log.warning("inbox: run %s is left out, its log cannot be read: %s", r.run_id, why)
            continue
        parents = (await rt.get(r.run_id)).parents if state.config else ()
        out.extend(shape.approvals(rt, state, parents))
    return out
