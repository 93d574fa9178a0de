"""``SteadMiddleware``: a ``create_agent`` middleware handing each model call and each tool
call to the drive's journal (``stead.foreign``).

``awrap_model_call`` makes the agent's model call one of the run's model turns: replayed from
the log when the turn is recorded, else performed by the run loop and recorded first.
``awrap_tool_call`` sees each tool call before it runs, with its id: the log already holds
its intent (the reply that asked for it); the run loop runs it by its effect class and
records its result by call id; the agent is given back the recorded result. Outside a stead
drive both pass the call through unchanged.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk, GenerationChunk
from langchain_core.tracers.context import register_configure_hook
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from stead.core.effects import ToolFailed, ToolSucceeded
from stead.core.events import AssistantMessageRecorded
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.foreign import current_journal, current_progress
from stead.providers import ModelResponse as SteadResponse
from stead.tools import serialize_result

SEEN: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "stead.langchain.seen", default=None
)
"""Set by a launch: the middleware notes here that it journaled a model call."""


class _Deltas(AsyncCallbackHandler):
    """Hands a streamed model call's text deltas to the run's live progress."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink

    async def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        text = token if isinstance(token, str) else "".join(t for t in token if isinstance(t, str))
        if text:
            self.sink(text)


_DELTAS: contextvars.ContextVar[_Deltas | None] = contextvars.ContextVar(
    "stead.langchain.deltas", default=None
)
# LangChain adds the handler in this variable to every run configured while it is set: the
# model call a body performs (in a task of its own, so the setting stays with that call).
register_configure_hook(_DELTAS, inheritable=True)


class SteadMiddleware(AgentMiddleware):
    """Makes a ``create_agent`` agent's model and tool calls a stead run's turns and calls;
    give the agent to ``stead.langchain.durable`` (see docs/langchain.md)."""

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        journal = current_journal()
        if journal is None:
            return await handler(request)
        seen = SEEN.get()
        if seen is not None:
            seen.append(True)
        model_name = str(
            getattr(request.model, "model_name", None) or getattr(request.model, "model", "")
        )

        async def body() -> SteadResponse:
            sink = current_progress()
            if sink is not None:  # a model that streams sends its deltas on the way
                _DELTAS.set(_Deltas(sink))
            response = await handler(request)
            replies = [m for m in response.result if isinstance(m, AIMessage)]
            return reply_of(replies[-1] if replies else AIMessage(content=""), model_name)

        return message_of(await journal.model(body))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        journal = current_journal()
        if journal is None:
            return await handler(request)
        call = request.tool_call
        call_id = str(call.get("id") or "")
        name = call["name"]
        args = call.get("args") or {}

        def same(recorded: str) -> bool:
            try:
                return bool(json.loads(recorded or "{}") == args)
            except ValueError:
                return False

        async def body() -> ToolSucceeded | ToolFailed:
            result = await handler(request)
            if not isinstance(result, ToolMessage):
                return ToolFailed(
                    failure=f"the tool {name!r} returned a {type(result).__name__}; stead "
                    "records a tool's message, not a graph command"
                )
            text = result.content if isinstance(result.content, str) else result.text
            if result.status == "error":
                return ToolFailed(failure=text)
            return ToolSucceeded(content=serialize_result(text))

        recorded = await journal.tool(call_id, name, same, body)
        return ToolMessage(
            content=recorded.content,
            tool_call_id=call_id,
            name=name,
            status="error" if recorded.is_error else "success",
        )


def reply_of(message: AIMessage, model_name: str) -> SteadResponse:
    """A LangChain model reply as the reply the log records."""
    calls = tuple(
        ToolCall(id=str(c.get("id") or ""), name=c["name"], arguments=json.dumps(c["args"]))
        for c in message.tool_calls
    )
    u: dict[str, Any] = dict(message.usage_metadata or {})
    details = u.get("input_token_details") or {}
    cached = int(details.get("cache_read") or 0)
    written = int(details.get("cache_creation") or 0)
    usage = Usage(
        input_tokens=max(int(u.get("input_tokens") or 0) - cached - written, 0),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_read_input_tokens=cached,
        cache_creation_input_tokens=written,
    )
    reply = AssistantMessage(
        text=message.text, tool_calls=calls, stop_reason="tool_use" if calls else "end_turn"
    )
    name = str((message.response_metadata or {}).get("model_name") or model_name)
    return SteadResponse(message=reply, usage=usage, model=name)


def message_of(recorded: AssistantMessageRecorded) -> AIMessage:
    """A turn's recorded reply as the ``AIMessage`` the agent reads."""
    m = recorded.message
    u = recorded.usage
    total_in = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens
    return AIMessage(
        content=m.text,
        tool_calls=[
            {
                "id": c.id,
                "name": c.name,
                "args": json.loads(c.arguments or "{}"),
                "type": "tool_call",
            }
            for c in m.tool_calls
        ],
        usage_metadata={
            "input_tokens": total_in,
            "output_tokens": u.output_tokens,
            "total_tokens": total_in + u.output_tokens,
        },
        response_metadata={"model_name": recorded.model},
    )
