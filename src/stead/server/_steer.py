"""The API's steering routes: start a run, decide a pending call, cancel, resume. Each
records what a person or program said and returns at once; a worker drives the run."""

from __future__ import annotations

from fastapi import APIRouter

from stead.core.fork import decode_messages
from stead.server import _shape as shape
from stead.server._deps import Caller, CallPath, Rt, RunPath
from stead.server._models import Answer, Approve, CreateRun, Deny, Fork, RunDetail, Steer

router = APIRouter()


@router.post("/runs", response_model=RunDetail, status_code=201, tags=["runs"])
async def create(body: CreateRun, _: Caller, rt: Rt) -> RunDetail:
    """Queue a run of a registered agent; a worker picks it up."""
    run_id = await rt.start(
        body.agent,
        body.input,
        run_id=body.run_id,
        session_id=body.session_id,
        correlation_id=body.correlation_id,
    )
    return await shape.detail(rt, run_id)


@router.post(
    "/runs/{run_id}/approvals/{call_id}/approve", response_model=RunDetail, tags=["approvals"]
)
async def approve(
    run_id: RunPath, call_id: CallPath, body: Approve, by: Caller, rt: Rt
) -> RunDetail:
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
    return await shape.detail(rt, run_id)


@router.post(
    "/runs/{run_id}/approvals/{call_id}/deny", response_model=RunDetail, tags=["approvals"]
)
async def deny(run_id: RunPath, call_id: CallPath, body: Deny, by: Caller, rt: Rt) -> RunDetail:
    """Deny a gated call; the model reads the reason as the call's error result."""
    await rt.deny(run_id, call_id, body.reason, token=body.token, by=by)
    return await shape.detail(rt, run_id)


@router.post(
    "/runs/{run_id}/approvals/{call_id}/answer", response_model=RunDetail, tags=["approvals"]
)
async def answer(run_id: RunPath, call_id: CallPath, body: Answer, by: Caller, rt: Rt) -> RunDetail:
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
    return await shape.detail(rt, run_id)


@router.post("/runs/{run_id}/cancel", response_model=RunDetail, tags=["runs"])
async def cancel(run_id: RunPath, body: Steer, by: Caller, rt: Rt) -> RunDetail:
    """Cancel a run: its owner stops the model and the tools' process groups."""
    await rt.cancel(run_id, body.reason or f"cancelled by {by}", by=by)
    return await shape.detail(rt, run_id)


@router.post("/runs/{run_id}/resume", response_model=RunDetail, tags=["runs"])
async def resume(run_id: RunPath, body: Steer, by: Caller, rt: Rt) -> RunDetail:
    """Send a failed, cancelled or timed-out run back to the queue for a worker."""
    await rt.requeue(run_id, body.reason or f"resumed by {by}")
    return await shape.detail(rt, run_id)


@router.post("/runs/{run_id}/fork", response_model=RunDetail, status_code=201, tags=["runs"])
async def fork(run_id: RunPath, body: Fork, _: Caller, rt: Rt) -> RunDetail:
    """Queue a new run whose history is this run's through turn ``at_turn``, then
    ``input``: nothing carried runs again, a call in flight at that turn is not carried
    (docs/lifecycle.md). Returns the fork; a worker drives it."""
    messages = None if body.messages is None else decode_messages(body.messages)
    view = await rt.fork(
        run_id, at_turn=body.at_turn, input=body.input, messages=messages, agent=body.agent
    )
    return await shape.detail(rt, view.run_id)
