"""Events on the wire: every kind round-trips through JSON, and decode refuses bad rows."""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, fields
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest
from core_strategies import events, events_of, sample_event
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.core.event_codec import VERSION, decode, encode, problem
from stead.core.events import (
    EVENT_TYPES,
    AssistantMessageRecorded,
    Event,
    RunCancelled,
    RunCompleted,
    ToolResultRecorded,
)
from stead.core.messages import AssistantMessage, Usage

# The wire format's kinds, pinned: adding or renaming one is a deliberate format change.
KINDS = {
    "run_created",
    "run_started",
    "run_recovered",
    "turn_started",
    "turn_resumed",
    "notice_injected",
    "model_call_failed",
    "assistant_message",
    "tool_call_requested",
    "loop_detected",
    "tool_call_started",
    "tool_result_recorded",
    "tool_attempt_failed",
    "tool_outcome_unknown",
    "tool_call_deferred",
    "tool_reconciled",
    "approval_requested",
    "approval_decided",
    "run_completed",
    "run_failed",
    "step_failed",
    "run_cancel_requested",
    "run_cancelled",
    "run_timed_out",
    "run_deadline_set",
    "run_requeued",
    "effect_reconciled",  # recovery at a takeover
    "redispatch",
    "tools_listed",
    "trace_linked",
    "run_forked",  # a fork's lineage
    "agent_recorded",  # agent versions across deploys
    "agent_changed",
}

CLASSES = sorted(EVENT_TYPES.values(), key=lambda cls: cls.kind)


def test_event_kinds_are_pinned() -> None:
    assert set(EVENT_TYPES) == KINDS
    assert len(EVENT_TYPES) == len(KINDS) == 33
    assert set(VERSION) == KINDS
    assert all(v == 1 for v in VERSION.values())


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.kind)
def test_events_are_frozen_keyword_only_data(cls: type[Any]) -> None:
    params = cls.__dataclass_params__
    assert params.frozen
    assert cls.__dataclass_fields__  # a dataclass
    assert all(f.kw_only for f in fields(cls))
    assert "kind" not in {f.name for f in fields(cls)}  # a ClassVar tag, not data
    with pytest.raises(TypeError):
        cls("positional")


def _wire(event: Event) -> Event:
    kind, version, data = encode(event)
    row = json.loads(json.dumps({"kind": kind, "version": version, "data": data}))
    return decode(row["kind"], row["version"], row["data"])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.kind)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_round_trip_per_kind(cls: type[Any], data: st.DataObject) -> None:
    event = data.draw(events_of(cls))
    kind, version, _ = encode(event)
    assert kind == cls.kind
    assert version == VERSION[kind]
    assert _wire(event) == event


@settings(max_examples=200, deadline=None)
@given(events())
def test_round_trip_any(event: Event) -> None:
    decoded = _wire(event)
    assert decoded == event
    assert type(decoded) is type(event)
    assert encode(decoded) == encode(event)


def test_defaults_are_left_out_of_the_row() -> None:
    assert encode(RunCancelled()) == ("run_cancelled", 1, {})
    assert encode(RunCompleted(output="x")) == ("run_completed", 1, {"output": "x"})
    _, _, data = encode(
        ToolResultRecorded(turn_index=0, tool_call_id="c", name="n", content="", is_error=True)
    )
    assert data == {
        "turn_index": 0,
        "tool_call_id": "c",
        "name": "n",
        "content": "",
        "is_error": True,
    }


def test_nested_values_are_plain_json() -> None:
    event = AssistantMessageRecorded(
        turn_index=2,
        message=AssistantMessage(text="hi"),
        usage=Usage(input_tokens=3),
        model="m",
    )
    assert encode(event)[2] == {
        "turn_index": 2,
        "message": {"role": "assistant", "text": "hi"},
        "usage": {"input_tokens": 3},
        "model": "m",
    }


# -- refusals --------------------------------------------------------------------------------


def _valid_data(cls: type[Any]) -> dict[str, Any]:
    return json.loads(json.dumps(encode(sample_event(cls))[2]))


def _wrong_value(hint: Any) -> Any:
    """A JSON value of the wrong type for ``hint``."""
    if hint in (str, AssistantMessage, Usage) or get_origin(hint) in (dict, tuple) or hint is dict:
        return 5
    if hint in (int, float):
        return "5"
    if hint is bool:
        return "yes"
    origin = get_origin(hint)
    if origin is Literal:
        return "no_such_value"
    if origin in (types.UnionType, typing.Union):
        arm = next(a for a in get_args(hint) if a is not type(None))
        return _wrong_value(arm)
    raise TypeError(hint)  # pragma: no cover


REQUIRED = [
    (cls, f.name)
    for cls in CLASSES
    for f in fields(cls)
    if f.default is MISSING and f.default_factory is MISSING
]
ALL_FIELDS = [(cls, f.name) for cls in CLASSES for f in fields(cls)]
TYPED_FIELDS = [(c, n) for c, n in ALL_FIELDS if get_type_hints(c)[n] is not Any]
"""Fields with a wrong JSON type (``RunCompleted.data`` takes every JSON value)."""


def test_every_kind_has_a_required_field_or_is_all_defaults() -> None:
    without = {cls.kind for cls in CLASSES} - {cls.kind for cls, _ in REQUIRED}
    assert without == {"run_cancel_requested", "run_cancelled", "run_timed_out", "run_requeued"}


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown event kind 'run_exploded'"):
        decode("run_exploded", 1, {})


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.kind)
def test_newer_version(cls: type[Any]) -> None:
    with pytest.raises(ValueError, match=rf"{cls.kind} v2 is newer than this stead understands"):
        decode(cls.kind, VERSION[cls.kind] + 1, _valid_data(cls))


@pytest.mark.parametrize("version", [0, -1])
def test_older_version_without_an_upgrade(version: int) -> None:
    with pytest.raises(ValueError, match=rf"no upgrade from run_started v{version}"):
        decode("run_started", version, {"owner": "w", "epoch": 1})


@pytest.mark.parametrize(("cls", "name"), REQUIRED, ids=lambda x: getattr(x, "kind", x))
def test_missing_required_field(cls: type[Any], name: str) -> None:
    data = _valid_data(cls)
    del data[name]
    with pytest.raises(ValueError, match=rf"{cls.kind}: missing field '{name}'"):
        decode(cls.kind, 1, data)


@pytest.mark.parametrize(("cls", "name"), TYPED_FIELDS, ids=lambda x: getattr(x, "kind", x))
def test_wrong_field_type(cls: type[Any], name: str) -> None:
    data = _valid_data(cls)
    data[name] = _wrong_value(get_type_hints(cls)[name])
    with pytest.raises(ValueError, match=rf"field '{name}'"):
        decode(cls.kind, 1, data)


@pytest.mark.parametrize(
    ("kind", "data", "message"),
    [
        ("turn_started", {"turn_index": True}, "field 'turn_index': expected an integer"),
        ("turn_started", {"turn_index": 1.0}, "field 'turn_index': expected an integer"),
        ("turn_started", {"turn_index": None}, "field 'turn_index': expected an integer"),
        ("tool_result_recorded", {"is_error": 1}, "field 'is_error': expected a boolean"),
        ("tool_result_recorded", {"source": "magic"}, "field 'source': 'magic' not one of"),
        ("tool_call_requested", {"effect_class": "wild"}, "field 'effect_class'"),
        ("tool_call_requested", {"rejection": 3}, "field 'rejection'"),
        ("run_created", {"config": []}, "field 'config'"),
        ("approval_requested", {"payload": "x"}, "field 'payload'"),
        ("approval_decided", {"decision": "maybe"}, "field 'decision'"),
        ("approval_requested", {"deadline": "soon"}, "field 'deadline'"),
        ("approval_requested", {"deadline": True}, "field 'deadline'"),
        ("tool_call_requested", {"requires_approval": "yes"}, "field 'requires_approval'"),
        ("run_failed", {"details": [1]}, "field 'details'"),
        ("assistant_message", {"message": []}, "field 'message': expected an object"),
        ("assistant_message", {"usage": 3}, "field 'usage': expected an object"),
        (
            "assistant_message",
            {"message": {"role": "user", "content": "hi"}},
            "field 'message': expected an assistant message",
        ),
    ],
)
def test_wrong_field_type_table(kind: str, data: dict[str, Any], message: str) -> None:
    row = _valid_data(EVENT_TYPES[kind]) | data
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        decode(kind, 1, row)


def test_a_structured_output_is_any_json_value_and_reads_back_equal() -> None:
    for data in ({"city": "Paris", "zip": "75001"}, [1, {"a": None}], "text", 3, None):
        event = RunCompleted(output="{}", data=data)
        kind, version, row = encode(event)
        assert decode(kind, version, json.loads(json.dumps(row))) == event
    assert "data" not in encode(RunCompleted(output="plain"))[2]  # a text answer: as before
    assert problem(RunCompleted(output="x", data={"n": float("nan")})) is not None
    assert problem(RunCompleted(output="x", data=("a", "tuple"))) is not None


def test_an_integer_is_a_number_for_a_float_field() -> None:
    data = _valid_data(EVENT_TYPES["approval_requested"]) | {"deadline": 1700000000}
    event = decode("approval_requested", 1, data)
    assert event.deadline == 1700000000.0
    assert isinstance(event.deadline, float)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.kind)
def test_unknown_field(cls: type[Any]) -> None:
    data = _valid_data(cls) | {"surprise": 1, "another": None}
    with pytest.raises(ValueError, match=rf"{cls.kind}: unknown fields \['another', 'surprise'\]"):
        decode(cls.kind, 1, data)


@pytest.mark.parametrize("data", [[], "x", None, 3, [["owner", "w"]]], ids=repr)
def test_data_that_is_not_an_object(data: Any) -> None:
    with pytest.raises(ValueError, match="event data is not a JSON object"):
        decode("run_started", 1, data)


@pytest.mark.parametrize(
    ("data", "field_name"),
    [
        ({"message": {"text": "no role"}}, "message"),
        ({"message": {"role": "assistant", "tool_calls": ["x"]}}, "message"),
        ({"message": {"role": "assistant", "tool_calls": [{"id": "c"}]}}, "message"),
        ({"usage": {"input_tokens": None}}, "usage"),
        ({"usage": {"input_tokens": [1]}}, "usage"),
    ],
    ids=["no-role", "call-not-object", "call-without-name", "usage-null", "usage-list"],
)
def test_malformed_nested_value_is_a_value_error(data: dict[str, Any], field_name: str) -> None:
    row = _valid_data(AssistantMessageRecorded) | data
    with pytest.raises(ValueError, match=rf"field '{field_name}'"):
        decode("assistant_message", 1, row)


@pytest.mark.parametrize(
    "data",
    [
        {"usage": {"input_tokens": "7"}},
        {"usage": {"output_tokens": 1.9}},
        {"usage": {"output_tokens": True}},
        {"message": {"role": "assistant", "text": None}},
        {
            "message": {
                "role": "assistant",
                "text": "",
                "tool_calls": [{"id": 1, "name": "n", "arguments": "{}"}],
            }
        },
    ],
    ids=["usage-str", "usage-float", "usage-bool", "text-null", "call-id-int"],
)
def test_mistyped_nested_value_is_refused(data: dict[str, Any]) -> None:
    row = _valid_data(AssistantMessageRecorded) | data
    with pytest.raises(ValueError):
        decode("assistant_message", 1, row)
