"""Structured output on the ScriptedModel: ``Agent(output_type=...)`` end to end.

The answer is a ``final_result`` tool call judged in the reply's own commit: accepted (the
run completes with the validated value on ``run_completed`` and ``RunView.data``), or sent
back with the validation errors, at most ``Limits.output_retries`` times, after which the run
fails ``output_invalid``. A text agent is as before and pays nothing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic wants it on Python < 3.12

import stead
from stead.core.events import RunCompleted, RunFailed, ToolResultRecorded
from stead.core.messages import NoticeMessage, ToolResultMessage
from stead.providers import ModelRequest
from stead.testing import Reply, ScriptedModel, assert_valid_history


class City(BaseModel):
    """A city and its postcode."""

    name: str
    zip: str


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


SEEN: list[ModelRequest] = []


def seen(reply: Reply | str) -> Any:
    def entry(request: ModelRequest) -> Reply | str:
        SEEN.append(request)
        return reply

    return entry


@pytest.fixture
def store(tmp_path: Path) -> str:
    SEEN.clear()
    return f"sqlite:///{tmp_path / 'runs.db'}"


async def _run(store: str, agent: stead.Agent, **kw: Any) -> tuple[stead.RunView, Any, list[Any]]:
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "Where is the Eiffel tower?", **kw)
        view = await rt.run(rid)
        return view, await rt.state(rid), [e.event for e in await rt.events(rid)]


@stead.tool(effect="read_only")
def lookup(place: str) -> str:
    """Look a place up."""
    return f"{place} is in Paris, 75007"


async def test_a_valid_final_result_completes_the_run_with_a_typed_value(store: str) -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=[("lookup", {"place": "Eiffel tower"})]),
            seen(Reply(tool_calls=[("final_result", {"name": "Paris", "zip": "75007"})])),
        ]
    )
    agent = stead.Agent("geo", model, [lookup], output_type=City)
    view, state, events = await _run(store, agent)

    assert view.status == "completed"
    assert view.data == City(name="Paris", zip="75007")
    assert isinstance(view.data, City)
    assert view.data_as(City).zip == "75007"
    assert view.data_json == {"name": "Paris", "zip": "75007"}
    assert json.loads(view.output or "") == view.data_json
    assert view.stop_reason == "final_result"
    (done,) = [e for e in events if isinstance(e, RunCompleted)]
    assert done.data == {"name": "Paris", "zip": "75007"}
    assert done.usage == view.usage
    assert_valid_history(state)
    # The model was offered the tool, with the type's schema (its docstring included).
    final = next(t for t in SEEN[0].tools if t.name == "final_result")
    assert final.parameters["required"] == ["name", "zip"]
    assert final.parameters["description"] == "A city and its postcode."

    # Another Runtime (as another process would): typed when it has the agent, JSON if not.
    async with stead.Runtime(store, agents=[agent]) as rt:
        assert (await rt.get(view.run_id)).data == City(name="Paris", zip="75007")
    async with stead.Runtime(store) as rt:
        plain = await rt.get(view.run_id)
        assert plain.data == {"name": "Paris", "zip": "75007"}
        assert plain.data_as(City) == City(name="Paris", zip="75007")


async def test_an_invalid_answer_goes_back_with_its_errors_then_completes(store: str) -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=[("final_result", {"name": "Paris", "zip": 75007})]),
            seen(Reply(tool_calls=[("final_result", {"name": "Paris", "zip": "75007"})])),
        ]
    )
    view, state, _ = await _run(store, stead.Agent("geo", model, output_type=City))
    assert view.status == "completed" and view.data == City(name="Paris", zip="75007")
    (error,) = [m for m in SEEN[0].messages if isinstance(m, ToolResultMessage)]
    assert error.is_error and error.name == "final_result"
    assert "- zip: Input should be a valid string" in error.content
    assert_valid_history(state)


async def test_past_output_retries_the_run_fails_with_a_stable_code(store: str) -> None:
    bad = Reply(tool_calls=[("final_result", {"name": "Paris"})])
    model = ScriptedModel([bad, bad, bad, "never asked"])
    agent = stead.Agent("geo", model, output_type=City, limits=stead.Limits(output_retries=1))
    view, _, events = await _run(store, agent)
    assert view.status == "failed"
    assert view.error is not None and view.error["code"] == "output_invalid"
    assert "2 invalid answers (Limits.output_retries is 1)" in view.error["message"]
    assert "zip: Field required" in view.error["message"]
    assert model.calls == 2  # bounded: not a loop
    (failed,) = [e for e in events if isinstance(e, RunFailed)]
    assert failed.details == {"invalid_answers": 2, "output_retries": 1}
    assert view.data is None


async def test_a_text_reply_is_read_as_json_or_sent_back_with_a_notice(store: str) -> None:
    model = ScriptedModel(
        [
            "It is in Paris.",
            seen('```json\n{"name": "Paris", "zip": "75007"}\n```'),
        ]
    )
    view, state, _ = await _run(store, stead.Agent("geo", model, output_type=City))
    assert view.status == "completed" and view.data == City(name="Paris", zip="75007")
    notices = [m for m in SEEN[0].messages if isinstance(m, NoticeMessage)]
    assert len(notices) == 1 and "calling the final_result tool" in notices[0].content
    assert view.turns == 2
    assert_valid_history(state)


@pytest.mark.parametrize(
    ("output_type", "answer", "value"),
    [
        (Point, {"x": 1, "y": 2}, Point(x=1, y=2)),
        (Person, {"name": "Ada", "age": 36}, {"name": "Ada", "age": 36}),
        (
            list[City],
            {"response": [{"name": "Paris", "zip": "75007"}]},
            [City(name="Paris", zip="75007")],
        ),
        (int, {"response": 42}, 42),
    ],
    ids=["dataclass", "typeddict", "list", "int"],
)
async def test_dataclasses_typeddicts_and_lists_are_outputs(
    store: str, output_type: Any, answer: dict[str, Any], value: Any
) -> None:
    model = ScriptedModel([seen(Reply(tool_calls=[("final_result", answer)]))])
    view, _, _ = await _run(store, stead.Agent("typed", model, output_type=output_type))
    assert view.status == "completed"
    assert view.data == value
    schema = next(t for t in SEEN[0].tools if t.name == "final_result").parameters
    assert schema["type"] == "object"  # a list or a scalar is wrapped: APIs want an object
    if "response" in answer:
        assert schema["required"] == ["response"]


async def test_a_final_result_ends_the_run_and_its_other_calls_do_not_run(store: str) -> None:
    ran: list[str] = []

    @stead.tool(effect="read_only")
    def note(text: str) -> str:
        """Note something."""
        ran.append(text)
        return "noted"

    model = ScriptedModel(
        [Reply(tool_calls=[("note", {"text": "x"}), ("final_result", {"name": "P", "zip": "1"})])]
    )
    view, state, events = await _run(store, stead.Agent("geo", model, [note], output_type=City))
    assert view.status == "completed" and view.data == City(name="P", zip="1")
    assert ran == []
    refused = [e for e in events if isinstance(e, ToolResultRecorded) and e.name == "note"]
    assert refused[0].is_error and "final result in this reply ends the run" in refused[0].content
    assert_valid_history(state)


async def test_the_last_turn_may_still_answer_and_a_last_turn_without_one_fails(
    store: str,
) -> None:
    good = ScriptedModel([Reply(tool_calls=[("final_result", {"name": "P", "zip": "1"})])])
    limits = stead.Limits(max_turns=1)
    view, _, _ = await _run(store, stead.Agent("one", good, output_type=City, limits=limits))
    assert view.status == "completed" and view.data == City(name="P", zip="1")

    chatty = ScriptedModel([Reply(tool_calls=[("lookup", {"place": "x"})])])
    agent = stead.Agent("two", chatty, [lookup], output_type=City, limits=limits)
    view, _, _ = await _run(store, agent)
    assert view.status == "failed" and view.error is not None
    assert view.error["code"] == "output_invalid"
    assert "the last turn (max_turns 1)" in view.error["message"]


async def test_text_output_is_the_default_and_costs_nothing(store: str) -> None:
    model = ScriptedModel([seen("Paris.")])
    view, _, events = await _run(store, stead.Agent("text", model, [lookup]))
    assert view.output == "Paris." and view.data is None and view.data_json is None
    assert [t.name for t in SEEN[0].tools] == ["lookup"]
    (done,) = [e for e in events if isinstance(e, RunCompleted)]
    assert done.data is None
    with pytest.raises(ValueError, match="no structured output"):
        view.data_as(City)


class NotASchema:
    def __init__(self, anything: object) -> None:
        self.anything = anything


def test_an_output_type_without_a_schema_is_a_user_error_that_says_what_to_pass() -> None:
    with pytest.raises(
        stead.UserError, match=r"cannot be turned into a JSON schema.*pydantic model"
    ):
        stead.Agent("bad", ScriptedModel([]), output_type=NotASchema)


def test_a_tool_named_final_result_clashes_with_an_output_type() -> None:
    @stead.tool(effect="read_only")
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(stead.UserError, match="rename the tool"):
        stead.Agent("clash", ScriptedModel([]), [final_result], output_type=City)
