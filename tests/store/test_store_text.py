"""Text UTF-8 cannot hold (lone surrogates: valid in a Python str and, escaped, in JSON)
from a model or a tool is made storable where it enters, with a note the model reads.

Before, the store's encoder raised ``UnicodeEncodeError``: the run stayed stuck, and a tool's
result was never recorded, so the handler ran again on every attempt. Run on both stores.
"""

from __future__ import annotations

from typing import Any

import pytest

import stead
from stead.core.events import AssistantMessageRecorded, ToolResultRecorded
from stead.providers import ModelRequest
from stead.store import Store
from stead.testing import Reply, ScriptedModel

pytestmark = pytest.mark.timeout(60)

SURROGATE_TEXT = "broken \ud800 text"
"""A reply's text as a provider may hand it over: a lone surrogate decoded from ``\\ud800``."""


async def test_a_reply_with_lone_surrogates_is_stored_repaired_and_the_model_reads_a_note(
    store: Store,
) -> None:
    seen: list[ModelRequest] = []
    echoed: list[str] = []

    @stead.tool(effect="read_only")
    def echo(s: str) -> str:
        """Say it back."""
        echoed.append(s)
        return f"you said {s}"

    def second(request: ModelRequest) -> str:
        seen.append(request)
        return "done"

    model = ScriptedModel(
        [Reply(text=SURROGATE_TEXT, tool_calls=[("echo", '{"s": "a\udcffb"}')]), second]
    )
    agent = stead.Agent("texts", model, [echo])
    rt = stead.Runtime(store, agents=[agent])
    run_id = await rt.start(agent, "say something")
    view = await rt.run(run_id)
    assert view.status == "completed"

    events = [s.event for s in await store.read_events(run_id)]
    [reply] = [e for e in events if isinstance(e, AssistantMessageRecorded) and e.turn_index == 0]
    assert reply.message.text.startswith("broken \ufffd text")
    assert "lone surrogates" in reply.message.text and "U+FFFD" in reply.message.text
    assert reply.message.tool_calls[0].arguments == '{"s": "a\ufffdb"}'
    assert echoed == ["a\ufffdb"]  # the call ran once, with the repaired text

    # the model reads its own reply back, note included
    [request] = seen
    texts = [getattr(m, "text", "") for m in request.messages]
    assert any("broken \ufffd text" in t and "lone surrogates" in t for t in texts)


async def test_a_tool_result_with_lone_surrogates_is_recorded_once_and_the_handler_runs_once(
    store: Store,
) -> None:
    calls: list[int] = []

    @stead.tool(effect="read_only")
    def listdir() -> list[str]:
        """List a folder (one name is not UTF-8: os.listdir gives it surrogate escapes)."""
        calls.append(1)
        return ["notes.txt", "caf\udce9.txt"]

    @stead.tool(effect="read_only")
    def readme() -> str:
        """Read a file whose bytes were decoded with surrogateescape."""
        calls.append(2)
        return "line \udcff"

    model = ScriptedModel([Reply(tool_calls=[("listdir", {}), ("readme", {})]), "ok"])
    agent = stead.Agent("files", model, [listdir, readme])
    rt = stead.Runtime(store, agents=[agent])
    run_id = await rt.start(agent, "what is here?")
    view = await rt.run(run_id)
    assert view.status == "completed"
    assert sorted(calls) == [1, 2]  # each handler ran once

    results = [
        s.event for s in await store.read_events(run_id) if isinstance(s.event, ToolResultRecorded)
    ]
    by_name: dict[str, Any] = {r.name: r for r in results}
    assert len(results) == 2 and set(by_name) == {"listdir", "readme"}
    assert by_name["listdir"].content.startswith('["notes.txt","caf\ufffd.txt"]')
    assert by_name["readme"].content.startswith("line \ufffd")
    for r in results:
        assert not r.is_error and "lone surrogates" in r.content
    state = await rt.state(run_id)
    assert any("caf\ufffd.txt" in getattr(m, "content", "") for m in state.messages)


async def test_a_tool_error_with_lone_surrogates_is_recorded_once(store: Store) -> None:
    calls: list[int] = []

    @stead.tool(effect="read_only")
    def opener(path: str) -> str:
        """Open a file."""
        calls.append(1)
        raise FileNotFoundError(f"no such file: {path}\udcff")

    model = ScriptedModel([Reply(tool_calls=[("opener", {"path": "x"})]), "ok"])
    agent = stead.Agent("errs", model, [opener])
    rt = stead.Runtime(store, agents=[agent])
    run_id = await rt.start(agent, "open x")
    assert (await rt.run(run_id)).status == "completed"
    assert calls == [1]
    [result] = [
        s.event for s in await store.read_events(run_id) if isinstance(s.event, ToolResultRecorded)
    ]
    assert result.is_error and "\ufffd" in result.content and "lone surrogates" in result.content
