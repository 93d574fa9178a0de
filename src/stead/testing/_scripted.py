"""ScriptedModel: a deterministic ModelProvider for tests and demos.

The reply for a request is chosen by how many assistant messages the request already holds,
not by how often this object was called. So a run resumed in a brand-new process after a
crash gets exactly the reply the dead process would have got: the script is a function of
the durable history, like a real model of the conversation.
"""

from __future__ import annotations

import asyncio
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stead._signal import AbortSignal
from stead.core.messages import AssistantMessage, Message, ToolCall, Usage
from stead.errors import Aborted, ProviderError
from stead.providers import ModelCall, ModelRequest, ModelResponse

CallSpec = ToolCall | tuple[str, dict[str, Any] | str]


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted model reply."""

    text: str = ""
    tool_calls: Sequence[CallSpec] = ()
    """Calls as ToolCall, or (name, arguments dict or raw argument text)."""
    usage: Usage | None = None
    """Usage to report; estimated from text length when None."""
    error: str | None = None
    """Fail with this failure code instead of replying."""
    fail_times: int | None = None
    """With ``error``: fail only the first N attempts in this process, then reply."""
    delay: float = 0.0
    """Seconds to wait before replying (to model latency)."""


Script = Reply | str | Callable[[ModelRequest], "Reply | str"]


@dataclass
class ScriptedModel:
    """Replies from a script, indexed by turn."""

    replies: Sequence[Script]
    """One entry per turn: a Reply, plain final text, or a function of the request."""
    name: str = "scripted"
    """Model name recorded with each reply."""
    delay: float = 0.0
    """Default latency per call, in seconds."""
    calls: int = field(default=0, init=False)
    """How many times this object was called (in this process)."""
    _failures: dict[int, int] = field(default_factory=dict, init=False, repr=False)
    _built: dict[int, tuple[Reply, AssistantMessage]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Each turn's reply as a message, by the script entry it was built from: the message is
    immutable, and building it again (its arguments as JSON, its text checked) for every run
    of a script is most of this model's cost."""
    _seen: dict[int, tuple[tuple[Message, ...], int, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """The last conversation seen of each run (by its first message), with its assistant
    turns and characters: the next request of that run extends it, and only the new messages
    are measured."""

    @property
    def model_name(self) -> str:
        """The name recorded with each reply."""
        return self.name

    async def complete(self, call: ModelCall) -> ModelResponse:
        """Answer turn N with script entry N."""
        request, signal, on_progress = call.request, call.signal, call.on_progress
        self.calls += 1
        turn, prompt_chars = self._measure(request.messages)
        if turn >= len(self.replies):
            raise ProviderError(
                f"ScriptedModel has {len(self.replies)} replies but was asked for turn {turn}",
                code="bad_request",
            )
        entry = self.replies[turn]
        reply = entry(request) if callable(entry) else entry
        if isinstance(reply, str):
            reply = Reply(text=reply)
        delay = reply.delay or self.delay
        if delay:
            await _sleep(delay, signal)
        if reply.error is not None:
            seen = self._failures.get(turn, 0)
            if reply.fail_times is None or seen < reply.fail_times:
                self._failures[turn] = seen + 1
                raise ProviderError(f"scripted failure at turn {turn}", code=reply.error)
        if on_progress is not None and reply.text:
            for i in range(0, len(reply.text), 16):
                on_progress(reply.text[i : i + 16])
        built = self._built.get(turn)
        if built is not None and built[0] is reply:
            message = built[1]
        else:
            calls = tuple(_tool_call(c, turn, i) for i, c in enumerate(reply.tool_calls))
            stop = "tool_use" if calls else "end_turn"
            message = AssistantMessage(text=reply.text, tool_calls=calls, stop_reason=stop)
            self._built[turn] = (reply, message)
        usage = reply.usage or _estimate(len(request.system) + prompt_chars, message)
        return ModelResponse(message=message, usage=usage, model=self.name)

    def _measure(self, messages: Sequence[Message]) -> tuple[int, int]:
        """(assistant messages, characters) of a conversation. A run's next request holds
        the same message objects as its last one plus a few: those are checked by identity
        (in C) and only the new ones measured, so a turn costs its new messages, not the
        whole history again. A conversation that shares nothing is measured whole."""
        if not messages:
            return 0, 0
        key = id(messages[0])
        start = turns = chars = 0
        hit = self._seen.get(key)
        if hit is not None:
            seen, seen_turns, seen_chars = hit
            # ``seen`` keeps its messages alive, so an id here still names the same object.
            if len(seen) <= len(messages) and all(map(operator.is_, seen, messages)):
                start, turns, chars = len(seen), seen_turns, seen_chars
        for m in messages[start:]:
            if isinstance(m, AssistantMessage):
                turns += 1
                chars += len(m.text) + sum(len(c.arguments) + len(c.name) for c in m.tool_calls)
            else:
                chars += len(m.content)
        if len(self._seen) >= _SEEN_MAX:
            self._seen.clear()  # bounded: a fresh measure costs a scan, never a wrong answer
        self._seen[key] = (tuple(messages), turns, chars)
        return turns, chars


def _tool_call(spec: CallSpec, turn: int, index: int) -> ToolCall:
    if isinstance(spec, ToolCall):
        return spec
    name, args = spec
    text = args if isinstance(args, str) else json.dumps(args)
    return ToolCall(id=f"call_{turn}_{index}", name=name, arguments=text)


_SEEN_MAX = 4096
"""Conversations ``ScriptedModel._measure`` remembers (one a run in flight)."""


def _estimate(prompt: int, message: AssistantMessage) -> Usage:
    """~4 characters a token, deterministic, so budgets behave in tests like in life."""
    out = len(message.text) + sum(len(c.arguments) + len(c.name) for c in message.tool_calls)
    return Usage(input_tokens=prompt // 4 + 1, output_tokens=out // 4 + 1)


async def _sleep(seconds: float, signal: AbortSignal) -> None:
    waiter = asyncio.ensure_future(signal.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=seconds)
        if done:
            raise Aborted(signal.reason)
    finally:
        waiter.cancel()
