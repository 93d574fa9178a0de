"""A tagged record is a frozen, keyword-only, slotted dataclass whose kind is on its class."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from stead.core import decide, effects
from stead.core.events import EVENT_TYPES, ToolCallStarted
from stead.core.tagged import TaggedRecord, tagged

RECORDS = [
    *EVENT_TYPES.values(),
    *typing.get_args(decide.Step),
    *typing.get_args(effects.Outcome),
]


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.kind)
def test_every_tagged_record_keeps_its_kind_on_the_class(cls: type[TaggedRecord]) -> None:
    assert issubclass(cls, TaggedRecord)
    assert "kind" not in {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    assert all(f.kw_only for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    assert "__dict__" not in dir(cls)  # slotted, bases included


def test_kinds_are_unique_within_each_union() -> None:
    for union in (decide.Step, effects.Outcome):
        kinds = [c.kind for c in typing.get_args(union)]
        assert len(kinds) == len(set(kinds))


def test_a_shared_base_field_comes_first_and_is_frozen() -> None:
    e = ToolCallStarted(turn_index=1, tool_call_id="c", attempt=2, effect_id="k")
    assert [f.name for f in dataclasses.fields(e)][:2] == ["turn_index", "tool_call_id"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.turn_index = 2  # type: ignore[misc]
    assert not hasattr(e, "__dict__")


def test_a_class_off_the_base_is_refused() -> None:
    with pytest.raises(TypeError, match="TaggedRecord"):

        @tagged("stray")
        class Stray:
            x: int
