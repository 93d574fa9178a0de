"""The generated check and encoder of a record say exactly what its nodes say.

``stead.core.codegen`` compiles each record's ``ok`` and ``enc`` from its nodes' templates;
``why`` (the explanation, field by field) and ``dec`` (the reader) are not generated. So for
every field of every event, with any value there (well typed or hostile), the generated
check must agree with the explanation, and what it accepts must encode to what the reader
reads back equal (text UTF-8 cannot hold is the store's check, on the row, not the codec's:
such a value is repaired when it is read, so it is left out of the round trip).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import core_strategies
import pytest
from core_strategies import sample_event
from hypothesis import HealthCheck, given, settings

from stead.core.event_codec import RECORDS, decode, encode
from stead.core.events import EVENT_TYPES
from stead.core.messages import (
    MESSAGE,
    AssistantMessage,
    RedactedThinking,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from stead.store.sql._base import dumps

HOSTILE: list[Any] = [
    0,
    -1,
    2**31,
    2**63,
    -(2**63),
    True,
    1.5,
    math.nan,
    "",
    "text",
    "a\x00b",
    "\ud800",
    None,
    (),
    [],
    {},
    {"k": 1},
    {"k": math.inf},
    object(),
    "read_only",
    "executed",
    "policy",
    "approve",
    (ToolCall(id="c", name="t", arguments="{}"),),
    ("not a call",),
    [ToolCall(id="c", name="t", arguments="{}")],
    (Thinking(text="t", signature="s"), RedactedThinking(data="d")),
    AssistantMessage(text="hi"),
    Usage(input_tokens=3),
    UserMessage(content="x"),
]


def _with(value: Any, name: str, v: Any) -> Any:
    """A copy of a frozen slotted dataclass with one field set to anything."""
    out = dataclasses.replace(value)
    object.__setattr__(out, name, v)
    return out


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_the_generated_check_agrees_with_the_explanation_field_by_field(kind: str) -> None:
    record = RECORDS[kind]
    base = sample_event(EVENT_TYPES[kind])
    assert record.ok(base) and record.why(base) is None
    for f in dataclasses.fields(base):
        for v in HOSTILE:
            event = _with(base, f.name, v)
            ok, why = record.ok(event), record.why(event)
            assert ok is (why is None), (kind, f.name, v, why)
            # The store's one call: the text of what the check accepts, None for the rest
            assert record.checked(event) == (record.to_text(event) if ok else None)
            if ok and v != "\ud800":
                kind_, version, data = encode(event)
                assert decode(kind_, version, data) == event, (kind, f.name, v)


@pytest.mark.parametrize(
    "message",
    [
        UserMessage(content="x"),
        AssistantMessage(text="", tool_calls=(ToolCall(id="c", name="t", arguments="{}"),)),
        ToolResultMessage(tool_call_id="c", name="t", content="r", is_error=True),
    ],
)
def test_a_message_field_set_to_anything_is_checked_as_the_reader_reads(message: Any) -> None:
    for f in dataclasses.fields(message):
        for v in HOSTILE:
            m = _with(message, f.name, v)
            ok, why = MESSAGE.ok(m), MESSAGE.why(m)
            assert ok is (why is None), (type(message).__name__, f.name, v, why)
            assert MESSAGE.checked is not None
            assert MESSAGE.checked(m) == (MESSAGE.text_names["texts"][type(m)](m) if ok else None)
            if ok and v != "\ud800":
                assert MESSAGE.dec(MESSAGE.enc(m)) == m


def test_a_copy_carries_every_shared_field_and_only_those() -> None:
    """``compile_copy`` builds the target from the fields both dataclasses have (here a call's
    state from its request), the rest from keywords or their defaults."""
    from stead.core.codegen import compile_copy
    from stead.core.events import ToolCallRequested
    from stead.core.fold import CallState

    request = dataclasses.replace(
        core_strategies.request(2, "c1", "non_idempotent", rejection="bad"),
        requires_approval=True,
        final=True,
    )
    copy = compile_copy(ToolCallRequested, CallState, "attempts")
    state = copy(request, attempts=3)
    shared = {f.name for f in dataclasses.fields(CallState)} & {
        f.name for f in dataclasses.fields(ToolCallRequested)
    }
    assert shared == {
        "turn_index",
        "tool_call_id",
        "name",
        "arguments",
        "effect_class",
        "idempotency_key",
        "rejection",
        "requires_approval",
    }
    assert {n: getattr(state, n) for n in shared} == {n: getattr(request, n) for n in shared}
    assert (state.attempts, state.result, state.decision) == (3, None, None)
    with pytest.raises(TypeError):
        copy(request, unknown=1)  # only the keywords it was compiled for


def _fast(cls: type[Any]) -> bool:
    """Whether ``cls.__init__`` is ``fast_init``'s (it calls slot setters bound as ``_g*``)."""
    return any(n.startswith("_g") for n in cls.__init__.__code__.co_names)


def test_fast_init_is_the_dataclass_init_but_faster() -> None:
    """``fast_init``'s ``__init__`` has the dataclass's signature and fills every field as
    the dataclass's did (defaults, factories, ``init=False``, ``__post_init__``); the class
    stays frozen."""
    import inspect

    from stead.core.codegen import fast_init

    def declare() -> type[Any]:
        @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
        class Rec:
            a: int
            b: str = "x"
            c: list[int] = dataclasses.field(default_factory=list)
            d: int = dataclasses.field(default=5, init=False)
            e: list[int] = dataclasses.field(default_factory=lambda: [1], init=False)

            def __post_init__(self) -> None:
                object.__setattr__(self, "b", self.b + "!")

        return Rec

    slow, fast = declare(), fast_init(declare())
    assert _fast(fast) and not _fast(slow)
    assert str(inspect.signature(fast)) == str(inspect.signature(slow))
    for kwargs in ({"a": 1}, {"a": 2, "b": "y", "c": [3]}):
        assert repr(fast(**kwargs)) == repr(slow(**kwargs))
    assert fast(a=1).c is not fast(a=1).c  # a new list each time, as default_factory says
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast(a=1).a = 2  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'a'"):
        fast(b="y")

    @fast_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Positional:
        p: int
        q: int = 2

    assert _fast(Positional)
    assert (Positional(1), Positional(1, 3), Positional(p=4)) == (
        Positional(p=1, q=2),
        Positional(p=1, q=3),
        Positional(p=4, q=2),
    )
    assert str(inspect.signature(Positional)) == "(p: 'int', q: 'int' = 2) -> None"

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    assert fast_init(NoSlots).__init__ is NoSlots.__init__  # kept: nothing to set directly


def test_every_event_and_hot_record_has_the_fast_init() -> None:
    """Every tagged record (events, steps, outcomes) and the records built on every step get
    it, and build what the dataclass's own ``__init__`` built."""
    from stead.core.builders import CallAdmission
    from stead.core.decide import CallModel, ToolPlan
    from stead.core.effects import Assignment, AssignmentKey, ModelBody, ModelSucceeded, ToolBody
    from stead.core.fold import TurnUsage
    from stead.providers import ModelCall, ModelRequest, ModelResponse
    from stead.tools import ToolContext

    hot = [
        *EVENT_TYPES.values(),
        CallModel,
        ModelSucceeded,
        ToolPlan,
        Assignment,
        AssignmentKey,
        ModelBody,
        ToolBody,
        TurnUsage,
        CallAdmission,
        AssistantMessage,
        ToolResultMessage,
        ToolCall,
        Usage,
        UserMessage,
        ModelRequest,
        ModelResponse,
        ModelCall,
        ToolContext,
    ]
    assert [c.__name__ for c in hot if not _fast(c)] == []
    for cls in EVENT_TYPES.values():
        event = sample_event(cls)
        assert dataclasses.replace(event) == event  # replace() goes through __init__


@settings(max_examples=400, suppress_health_check=list(HealthCheck))
@given(core_strategies.events())
def test_the_generated_text_is_the_encoders_dict_written_compactly(event: Any) -> None:
    """``Record.to_text`` writes what ``dumps(enc(event))`` writes, byte for byte: the rows
    an append stores are the rows the dict-then-encoder path stored (golden logs unchanged)."""
    record = RECORDS[event.kind]
    if record.ok(event):
        assert record.to_text(event) == dumps(record.enc(event))
        assert record.checked(event) == record.to_text(event)
    else:
        assert record.checked(event) is None


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_the_generated_text_of_every_kind_with_every_field_set(kind: str) -> None:
    event = sample_event(EVENT_TYPES[kind])
    assert RECORDS[kind].to_text(event) == dumps(RECORDS[kind].enc(event))
