"""Chat over HTTP: a conversation's messages, a new message handed to the workers, and a
long-poll that waits for a run to come to rest.

    POST /conversations/{conversation}/messages  {"text": ..., "agent": ...}   202: its run id
    GET  /runs/{run_id}/wait?timeout=25                        200: it rests; 204: not yet
    GET  /conversations/{conversation}                         every message and its answer

The message is recorded and its run queued (``Runtime.submit``); a worker answers it, never
the request. The page then waits for the answer with the long-poll, or follows the run's
live stream (``GET /runs/{run_id}/events`` with ``Accept: text/event-stream``) once it exists.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, Field

from stead.core.messages import message_from_json
from stead.core.states import RunStatus
from stead.errors import RunNotFound, WaitTimeout
from stead.runtime import Runtime
from stead.server import _shape as shape
from stead.server._deps import Caller, RawRunPath, Rt
from stead.server._models import RunDetail, RunId, Short, Text, _Body
from stead.store import ConversationEntry

router = APIRouter()

ConversationPath = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,128}$", description="the conversation's id")
]

LONGEST_WAIT = 60.0
"""The longest one long-poll may hold its request, seconds: proxies drop idle requests."""


class PostMessage(_Body):
    """A user message for a conversation; a worker answers it."""

    text: Text = Field(min_length=1)
    agent: Short | None = Field(
        default=None, description="the agent that answers; needed for a new conversation"
    )
    message_id: RunId | None = Field(
        default=None, description="the sender's id: the same id again is the same message"
    )


class ChatMessage(BaseModel):
    """One message of a conversation and the run that answers it."""

    conversation_id: str
    position: int
    """From 0, in the order the messages were recorded."""
    message_id: str
    run_id: str
    agent: str
    text: str
    created_at: float
    status: RunStatus | None
    """The answering run's status; null while it waits for the message before it."""
    output: str | None = None
    data: Any = None


class ConversationOut(BaseModel):
    """A conversation: its messages in order, each with its answer so far."""

    conversation_id: str
    messages: list[ChatMessage]


@router.post(
    "/conversations/{conversation}/messages",
    response_model=ChatMessage,
    status_code=202,
    tags=["conversations"],
)
async def post_message(
    conversation: ConversationPath, body: PostMessage, _: Caller, rt: Rt
) -> ChatMessage:
    """Record a message and queue the run that answers it; returns at once (202) with that
    run's id. A worker answers; wait with ``GET /runs/{run_id}/wait``. A new conversation
    needs ``agent``; ``conversation`` may also be a run's id (its conversation goes on)."""
    run_id = await rt.submit(conversation, body.text, agent=body.agent, message_id=body.message_id)
    entry = await rt.message_of(run_id)
    assert entry is not None  # submit recorded it
    return await _message(rt, entry)


@router.get("/conversations/{conversation}", response_model=ConversationOut, tags=["conversations"])
async def get_conversation(conversation: ConversationPath, _: Caller, rt: Rt) -> ConversationOut:
    """A conversation's messages in order, each with the run that answers it and its answer
    (empty for an id no message was sent to)."""
    entries = await rt.conversation(conversation)
    return ConversationOut(
        conversation_id=conversation, messages=[await _message(rt, e) for e in entries]
    )


@router.get(
    "/runs/{run_id}/wait",
    response_model=RunDetail,
    tags=["runs"],
    responses={204: {"description": "the timeout passed first: ask again"}},
)
async def wait(
    run_id: RawRunPath,
    _: Caller,
    rt: Rt,
    timeout: Annotated[float, Query(ge=0, le=LONGEST_WAIT)] = 25.0,  # noqa: ASYNC109
) -> Any:
    """Hold the request until the run rests (finished, or waiting on a person), then answer
    with it (200); 204 when ``timeout`` seconds pass first. A run that rests now answers at
    once. ``run_id`` may be a run ``POST .../messages`` returned that is not created yet."""
    try:
        view = await rt.wait(run_id, timeout=timeout)
    except WaitTimeout:
        return Response(status_code=204)
    return await shape.detail(rt, view.run_id)


async def _message(rt: Runtime, entry: ConversationEntry) -> ChatMessage:
    text = message_from_json(entry.input)
    fields: dict[str, Any] = {
        "conversation_id": entry.conversation_id,
        "position": entry.position,
        "message_id": entry.message_id,
        "run_id": entry.run_id,
        "agent": entry.agent,
        "text": getattr(text, "content", ""),
        "created_at": entry.created_at,
    }
    try:
        view = await rt.get(entry.run_id)
    except RunNotFound:  # created once the message before it is answered
        return ChatMessage(**fields, status=None)
    return ChatMessage(**fields, status=view.status, output=view.output, data=view.data_json)
