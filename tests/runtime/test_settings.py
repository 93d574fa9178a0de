"""Model settings on the ScriptedModel: per agent, per run, recorded on each reply and shown
by ``stead runs show``; a setting of the wrong type is a ``UserError`` where it is written.
(The mapping to each provider's API, through the official SDKs, is in
``tests/providers/test_everyday.py``.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import stead
from stead.cli import main
from stead.core.events import AssistantMessageRecorded, RunCreated
from stead.providers import ModelRequest
from stead.testing import ScriptedModel

SEEN: list[ModelRequest] = []


def _answer(request: ModelRequest) -> str:
    SEEN.append(request)
    return "Paris."


def test_agent_settings_run_settings_and_the_record_of_what_was_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SEEN.clear()
    store = f"sqlite:///{tmp_path / 'r.db'}"
    agent = stead.Agent(
        "geo",
        ScriptedModel([_answer]),
        settings=stead.ModelSettings(
            temperature=0.2, stop_sequences=["END"], extra={"top_k": 5}, max_output_tokens=300
        ),
        max_output_tokens=999,
    )

    async def go() -> tuple[str, list[Any]]:
        async with stead.Runtime(store, agents=[agent]) as rt:
            own = stead.ModelSettings(temperature=0.9, tool_choice="none", extra={"seed": 7})
            rid = await rt.start(agent, "Capital of France?", settings=own)
            await rt.run(rid)
            return rid, [e.event for e in await rt.events(rid)]

    rid, events = asyncio.run(go())
    (request,) = SEEN
    want = stead.ModelSettings(
        temperature=0.9,  # the run's own wins
        stop_sequences=("END",),
        tool_choice="none",
        max_output_tokens=300,
        extra={"top_k": 5, "seed": 7},  # merged
    )
    assert request.settings == want
    assert request.max_output_tokens == 300  # the settings' cap wins over the agent's
    created = next(e for e in events if isinstance(e, RunCreated))
    assert created.config == {
        "model_settings": {"temperature": 0.9, "tool_choice": "none", "extra": {"seed": 7}}
    }
    (reply,) = [e for e in events if isinstance(e, AssistantMessageRecorded)]
    assert reply.settings == want.to_json()
    assert stead.ModelSettings.from_json(reply.settings) == want  # a replay knows what was sent

    assert main(["--store", store, "runs", "show", rid]) == 0
    shown = capsys.readouterr().out
    assert "temperature=0.9" in shown and "stop_sequences=['END']" in shown


def test_a_text_agent_without_settings_records_none() -> None:
    assert stead.ModelSettings().to_json() == {}
    assert stead.ModelSettings().merged(None) == stead.ModelSettings()


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"temperature": "hot"}, "temperature takes a number"),
        ({"temperature": 3}, "temperature must be between 0 and 2"),
        ({"top_p": True}, "top_p takes a number"),
        ({"max_output_tokens": 0}, "max_output_tokens takes an int of at least 1"),
        ({"stop_sequences": "END"}, "stop_sequences takes a list of strings"),
        ({"stop_sequences": ["", "x"]}, "must all be non-empty strings"),
        ({"tool_choice": 1}, "tool_choice takes 'auto', 'none', 'required' or a tool's name"),
        ({"parallel_tool_calls": "no"}, "parallel_tool_calls takes True, False or None"),
        ({"extra": {"x": float("nan")}}, "extra must be plain JSON"),
    ],
)
def test_a_setting_of_the_wrong_type_is_a_user_error(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(stead.UserError, match=message.replace("(", r"\(")):
        stead.ModelSettings(**kw)


def test_settings_that_are_not_model_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(stead.UserError, match=r"settings takes a stead\.ModelSettings"):
        stead.Agent("a", ScriptedModel([]), settings={"temperature": 0.1})  # type: ignore[arg-type]

    async def go() -> None:
        agent = stead.Agent("a", ScriptedModel([]))
        async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
            with pytest.raises(stead.UserError, match=r"settings=stead\.ModelSettings"):
                await rt.start(agent, "hi", settings={"temperature": 0.1})  # type: ignore[arg-type]
            assert await rt.store.list_runs() == []  # nothing was written

    asyncio.run(go())
