"""The answer route: ``POST /runs/{run_id}/questions/{call_id}/answer``.

A question tool's call waits in the inbox (``GET /approvals``, ``reason: "question"``, its
question and answer schema in ``payload``); this route gives the answer. The runtime checks
it against the tool's answer type (a misfit is a 409 saying why, and the run keeps waiting),
records it as the caller's token name, and it is the call's result; a worker continues.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from stead.server import _shape as shape
from stead.server._deps import Caller, CallPath, Rt, RunPath
from stead.server._models import RunDetail, Short, _Body

router = APIRouter()


class AnswerQuestion(_Body):
    """The answer to a question a run asked, of the type its ``answer_schema`` says."""

    value: Any = Field(description="the answer (JSON; checked against the answer schema)")
    token: Short | None = None


@router.post(
    "/runs/{run_id}/questions/{call_id}/answer", response_model=RunDetail, tags=["approvals"]
)
async def answer_question(
    run_id: RunPath, call_id: CallPath, body: AnswerQuestion, by: Caller, rt: Rt
) -> RunDetail:
    """Answer a question a run asked: checked against its answer type, recorded as the
    token's name, and the call's result. A worker then continues the run."""
    await rt.answer(run_id, call_id, body.value, token=body.token, by=by)
    return await shape.detail(rt, run_id)
