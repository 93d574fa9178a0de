"""Every wait of a model call has an upper bound.

- A ``retry-after`` longer than ``Backoff.max_retry_wait`` (``100000`` seconds, a date in
  2099) is not slept through: the run fails at once with the call's code, and ``run_failed``
  records what the provider asked for and the limit.
- A stream that sends keep-alives and nothing else (Anthropic's ``event: ping``, OpenAI's SSE
  comment ``: keep-alive``) outlives any per-read ``timeout``; the provider's ``deadline``
  bounds the whole call, closes the stream and fails it with ``deadline_exceeded``, which is
  retried up to ``Limits.max_model_attempts``.

Through the official SDKs against the local wire server; no assertion on wall time (the
events say what happened).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from wire_server import Reply, WireServer
from wire_shapes import anthropic_error, anthropic_events, openai_error, openai_events, sse

import stead
from stead import AbortSignal, ProviderError, UserError
from stead.core.events import ModelCallFailed, RunFailed
from stead.core.messages import UserMessage
from stead.core.states import RunStatus
from stead.providers import ModelCall, ModelProvider, ModelRequest
from stead.providers.anthropic import AnthropicModel
from stead.providers.openai import OpenAIModel
from stead.runtime import Backoff

KINDS = ["anthropic", "openai"]
REQUEST = ModelRequest(model="m", system="", messages=(UserMessage(content="Hello"),))
SHORT = None
IN_2099 = "Thu, 01 Jan 2099 00:00:00 GMT"


def model_for(kind: str, server: WireServer, **kw: Any) -> ModelProvider:
    if kind == "anthropic":
        return AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=server.url, **kw)
    return OpenAIModel("gpt-4.1", api_key="k", base_url=server.url + "/v1", **kw)


def sdk_client(kind: str, server: WireServer) -> anthropic.AsyncAnthropic | openai.AsyncOpenAI:
    """A client of the official SDK on the wire server, for a model to share."""
    if kind == "anthropic":
        return anthropic.AsyncAnthropic(api_key="k", base_url=server.url)
    return openai.AsyncOpenAI(api_key="k", base_url=server.url + "/v1")


def fine(kind: str) -> Reply:
    """A whole reply: "Fine."."""
    if kind == "anthropic":
        return Reply(events=anthropic_events(["Fine."]))
    return Reply(events=openai_events(["Fine."]))


def rate_limited(kind: str, **headers: str) -> Reply:
    if kind == "anthropic":
        return anthropic_error(429, "rate_limit_error", "slow down", **headers)
    return openai_error(429, "Rate limit reached", "tokens", "rate_limit_exceeded", **headers)


def pinging_for_ever(kind: str) -> Reply:
    """The stream's opening, then keep-alives every 20 ms until the client goes away."""
    if kind == "anthropic":
        opening = anthropic_events(["Thinking it over"])[:4]
        return Reply(events=opening, keepalive=sse("ping", {"type": "ping"}), keepalive_every=0.02)
    opening = openai_events(["Thinking it over"])[:2]
    return Reply(events=opening, keepalive=b": keep-alive\n\n", keepalive_every=0.02)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("retry_after", ["100000", IN_2099])
async def test_a_retry_after_beyond_the_longest_wait_fails_the_run_at_once(
    kind: str, retry_after: str, server: WireServer, store: str
) -> None:
    server.push(rate_limited(kind, retry_after=retry_after), rate_limited(kind))
    chosen: list[float] = []

    class Recording(Backoff):
        def delay(self, attempt: int, retry_after: float | None, rand: random.Random) -> float:
            chosen.append(super().delay(attempt, retry_after, rand))
            return chosen[-1]

    agent = stead.Agent("patient", model_for(kind, server))
    backoff = Recording(base=0.001, cap=0.001, max_retry_wait=5.0)
    async with stead.Runtime(store, agents=[agent], backoff=backoff) as rt:
        rid = await rt.start(agent, "Hello")
        view = await rt.run(rid)
        events = [e.event for e in await rt.events(rid)]

    assert view.status is RunStatus.FAILED
    assert view.error is not None and view.error["code"] == "rate_limited"
    assert "longer than Backoff.max_retry_wait (5s)" in view.error["message"]
    assert chosen == []  # no wait was even chosen, let alone slept
    assert len(server.requests) == 1
    failed = [e for e in events if isinstance(e, ModelCallFailed)]
    assert [(e.attempt, e.code) for e in failed] == [(1, "rate_limited")]
    (ended,) = [e for e in events if isinstance(e, RunFailed)]
    assert ended.details is not None
    assert ended.details["max_retry_wait"] == 5.0 and ended.details["attempt"] == 1
    assert ended.details["retry_after"] > 99_000  # 2099 is further still


@pytest.mark.parametrize("kind", KINDS)
async def test_a_retry_after_within_the_longest_wait_is_still_honoured(
    kind: str, server: WireServer, store: str
) -> None:
    server.push(rate_limited(kind, retry_after_ms="20"), fine(kind))
    agent = stead.Agent("patient", model_for(kind, server))
    async with stead.Runtime(store, agents=[agent], backoff=SHORT) as rt:
        view = await rt.run(await rt.start(agent, "Hello"))
    assert view.status is RunStatus.COMPLETED and view.output == "Fine."
    assert len(server.requests) == 2


def test_the_backoff_never_waits_longer_than_its_longest_wait() -> None:
    backoff = Backoff(base=0.5, cap=30.0, max_retry_wait=60.0)
    assert backoff.delay(1, 45.0, random.Random(1)) == 45.0
    assert backoff.delay(1, 1e9, random.Random(1)) == 60.0
    assert backoff.refuses(60.5) and not backoff.refuses(60.0) and not backoff.refuses(None)


@pytest.mark.parametrize(
    "field", [{"max_retry_wait": -1.0}, {"cap": float("nan")}, {"base": "0.5"}]
)
def test_a_backoff_with_a_nonsense_figure_is_refused(field: dict[str, object]) -> None:
    with pytest.raises(UserError, match="Backoff"):
        Backoff(**field)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_of_keepalives_ends_at_the_deadline(kind: str, server: WireServer) -> None:
    reply = pinging_for_ever(kind)
    # Each read gets its 10 s; the pings every 20 ms would satisfy it for ever.
    model = model_for(kind, server, timeout=10.0, deadline=1.0)
    # A first call pays the SDK's lazy imports (seconds on a loaded machine), which would
    # leave the 1 s deadline no time to reach the server: made by a model of the same kind
    # with a deadline a loaded machine cannot miss (the imports are the process's).
    server.push(fine(kind))
    warm = model_for(kind, server, timeout=10.0, deadline=60.0)
    await warm.complete(ModelCall(REQUEST, AbortSignal(), None))
    server.requests.clear()
    server.push(reply)
    shown: list[str] = []
    with pytest.raises(ProviderError) as caught:
        await model.complete(ModelCall(REQUEST, AbortSignal(), shown.append))
    assert caught.value.code == "deadline_exceeded"
    assert "deadline of 1s" in str(caught.value)
    assert shown in ([], ["Thinking it over"])  # [] only on a machine slower than the deadline
    # The server was still writing keep-alives when the client closed the stream: it is
    # closed, not left open (unless the request never got there within the deadline).
    assert reply.client_closed.wait(10) or not server.requests


@pytest.mark.parametrize("kind", KINDS)
async def test_a_run_whose_stream_never_ends_fails_with_deadline_exceeded(
    kind: str, server: WireServer, store: str
) -> None:
    # Each attempt's request must reach the server within the 1 s deadline. A call pays the
    # SDK's lazy imports and, with no client given, builds a client (0.2-0.4 s each on a
    # loaded machine) inside it: one shared client, warmed by a first call, pays neither
    # inside an attempt (that path alone: test_a_stream_of_keepalives_ends_at_the_deadline).
    client = sdk_client(kind, server)
    try:
        model = model_for(kind, server, deadline=1.0, client=client)
        server.push(fine(kind))
        await model.complete(ModelCall(REQUEST, AbortSignal(), None))
        server.requests.clear()
        server.push(pinging_for_ever(kind), pinging_for_ever(kind))
        agent = stead.Agent("stuck", model, limits=stead.Limits(max_model_attempts=2))
        async with stead.Runtime(store, agents=[agent], backoff=SHORT) as rt:
            rid = await rt.start(agent, "Hello")
            view = await rt.run(rid)
            events = [e.event for e in await rt.events(rid)]
    finally:
        await client.close()
    assert view.status is RunStatus.FAILED
    assert view.error is not None and view.error["code"] == "deadline_exceeded"
    failed = [e for e in events if isinstance(e, ModelCallFailed)]
    # retryable, and bounded by Limits.max_model_attempts
    assert [(e.attempt, e.code) for e in failed] == [
        (1, "deadline_exceeded"),
        (2, "deadline_exceeded"),
    ]
    assert len(server.requests) == 2


@pytest.mark.parametrize("deadline", [0, -1.0, float("inf"), "60", True])
def test_a_deadline_that_is_not_a_positive_number_is_refused(deadline: object) -> None:
    with pytest.raises(UserError, match="deadline"):
        AnthropicModel("m", api_key="k", deadline=deadline)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="deadline"):
        OpenAIModel("m", api_key="k", deadline=deadline)  # type: ignore[arg-type]


def test_no_deadline_is_allowed_when_asked_for() -> None:
    AnthropicModel("m", api_key="k", deadline=None)
    OpenAIModel("m", api_key="k", deadline=None)
