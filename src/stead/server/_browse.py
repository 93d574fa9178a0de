"""Reading routes for an operator's screen: a run as steps (the compact timeline)."""

from __future__ import annotations

from fastapi import APIRouter

from stead.runtime import RunSteps
from stead.server._deps import Caller, Rt, RunPath

router = APIRouter()


@router.get("/runs/{run_id}/steps", response_model=RunSteps, tags=["runs"])
async def steps(run_id: RunPath, _: Caller, rt: Rt) -> RunSteps:
    """The run as steps: one a turn, with its model call (time, attempts, the last failure)
    and its tool calls (time, attempts, the last failure, how long each waited on a
    person), for a compact timeline."""
    return await rt.steps(run_id)
