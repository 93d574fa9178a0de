"""The agent's model under a journal: each model request is one of the run's model turns.

``JournaledModel`` wraps the agent's own ``agents.Model`` (``OpenAIChatCompletionsModel``,
``OpenAIResponsesModel``, any other). Under a stead drive a request goes through the
drive's journal: replayed from the log if its turn is recorded, else performed by the run loop
(streamed from the provider, text deltas to the run's live progress) and recorded first; the
SDK reads back only the recorded reply. Outside a drive it is the wrapped model, unchanged.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents import Model
from agents.items import ModelResponse as SdkResponse
from agents.usage import Usage as SdkUsage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from stead.core.events import AssistantMessageRecorded
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.errors import UserError
from stead.foreign import current_journal, current_progress
from stead.providers import ModelResponse


class JournaledModel(Model):
    """``inner`` with every request of a stead drive journaled as a model turn."""

    def __init__(self, inner: Model, model_name: str) -> None:
        self.inner = inner
        self.model_name = model_name

    async def get_response(self, *args: Any, **kwargs: Any) -> SdkResponse:
        journal = current_journal()
        if journal is None:
            return await self.inner.get_response(*args, **kwargs)

        async def body() -> ModelResponse:
            return reply_of(await self._streamed(args, kwargs), self.model_name)

        return response_of(await journal.model(body))

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """The wrapped model's stream, unjournaled: a stead run asks for its turns through
        ``get_response`` (``Runner.run``), which streams from the provider itself."""
        return self.inner.stream_response(*args, **kwargs)

    async def _streamed(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> SdkResponse:
        sink = current_progress()
        final: Response | None = None
        async for event in self.inner.stream_response(*args, **kwargs):
            if isinstance(event, ResponseTextDeltaEvent) and sink is not None and event.delta:
                sink(event.delta)
            elif isinstance(event, ResponseCompletedEvent):
                final = event.response
        if final is None:
            raise UserError(
                f"the model {self.model_name!r} ended its stream without a completed response"
            )
        return _sdk_response(final)

    async def close(self) -> None:
        await self.inner.close()


def _sdk_response(final: Response) -> SdkResponse:
    u = final.usage
    usage = SdkUsage()
    if u is not None:
        usage = SdkUsage(
            requests=1,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            total_tokens=u.total_tokens,
            input_tokens_details=u.input_tokens_details,
            output_tokens_details=u.output_tokens_details,
        )
    return SdkResponse(output=list(final.output), usage=usage, response_id=final.id)


def reply_of(response: SdkResponse, model_name: str) -> ModelResponse:
    """An SDK model response as the reply the log records: its text and its function calls
    (under the SDK's call ids), its usage."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for item in response.output:
        if isinstance(item, ResponseOutputMessage):
            text.extend(c.text for c in item.content if isinstance(c, ResponseOutputText))
        elif isinstance(item, ResponseFunctionToolCall):
            calls.append(ToolCall(id=item.call_id, name=item.name, arguments=item.arguments))
        else:
            raise UserError(
                f"the model replied with a {getattr(item, 'type', type(item).__name__)!r} item; "
                "stead journals text and function calls of an Agents SDK agent only"
            )
    u = response.usage
    cached = u.input_tokens_details.cached_tokens if u.input_tokens_details else 0
    usage = Usage(
        input_tokens=max(u.input_tokens - (cached or 0), 0),
        output_tokens=u.output_tokens,
        cache_read_input_tokens=cached or 0,
    )
    message = AssistantMessage(
        text="".join(text),
        tool_calls=tuple(calls),
        stop_reason="tool_use" if calls else "end_turn",
    )
    return ModelResponse(message=message, usage=usage, model=model_name)


def response_of(recorded: AssistantMessageRecorded) -> SdkResponse:
    """A turn's recorded reply as the SDK model response its agent reads."""
    m = recorded.message
    output: list[Any] = []
    if m.text:
        output.append(
            ResponseOutputMessage(
                id=f"msg_{recorded.turn_index}",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=m.text, annotations=[])],
            )
        )
    for c in m.tool_calls:
        output.append(
            ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{c.id}",
                call_id=c.id,
                name=c.name,
                arguments=c.arguments or "{}",
                status="completed",
            )
        )
    u = recorded.usage
    usage = SdkUsage(
        requests=1,
        input_tokens=u.input_tokens + u.cache_read_input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.input_tokens + u.cache_read_input_tokens + u.output_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=u.cache_read_input_tokens, cache_write_tokens=0
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    )
    return SdkResponse(output=output, usage=usage, response_id=None)


def same_json(recorded: str, now: str) -> bool:
    """Whether two JSON argument strings hold the same value."""
    try:
        return bool(json.loads(recorded or "{}") == json.loads(now or "{}"))
    except ValueError:
        return recorded == now
