"""What the store accepts, it can read back: the writer applies the reader's rules.

For any event of any kind, with any field values (well typed, or hostile: a dict where text
belongs, a negative or huge integer, NaN, a tuple, an object, text with lone surrogates or
NUL), either the store refuses it with ``InvalidEvent`` and writes nothing, or it reads it
back equal. A run's creation holds only the caller's values, so its refusal is an
``InvalidInput``, a ``UserError`` that names the argument.
"""

from __future__ import annotations

import itertools
import math
import sys
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from _builders import T0, created
from hypothesis import HealthCheck, given, settings
from hypothesis import event as outcome
from hypothesis import strategies as st

from stead.core.events import EVENT_TYPES, AssistantMessageRecorded, RunCreated, TurnStarted
from stead.core.messages import AssistantMessage, RedactedThinking, Thinking, ToolCall, Usage
from stead.errors import InvalidEvent, InvalidInput, RunNotFound, UserError
from stead.store import Store

sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
from core_strategies import strategy_for_hint

pytestmark = pytest.mark.timeout(300)

_RUNS = itertools.count()

# Any code point, surrogates (category Cs) and NUL included.
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
any_ints = st.integers(-(2**70), 2**70)
hostile_json = st.recursive(
    st.one_of(st.none(), st.booleans(), any_ints, st.floats(), any_text, st.just(object())),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner),
        st.dictionaries(any_text | st.integers(), inner, max_size=3),
    ),
    max_leaves=6,
)
any_tool_calls = st.builds(
    ToolCall,
    id=any_text | st.integers(),
    name=any_text,
    arguments=any_text | st.none(),
)
any_messages = st.builds(
    AssistantMessage,
    text=any_text | st.integers(),
    tool_calls=st.lists(any_tool_calls | st.integers(), max_size=2).map(tuple)
    | st.lists(any_tool_calls, max_size=2),
    stop_reason=any_text,
    thinking=st.lists(
        st.builds(Thinking, text=any_text, signature=any_text)
        | st.builds(RedactedThinking, data=any_text),
        max_size=2,
    ).map(tuple),
)
any_usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 2**63 - 1),
    output_tokens=st.integers(0, 10**6),
)
hostile = st.one_of(
    any_ints,
    st.floats(),
    st.booleans(),
    st.none(),
    any_text,
    hostile_json,
    any_messages,
    any_usages,
    st.just({"input_tokens": -5}),
)


typed_messages = st.builds(
    AssistantMessage,
    text=st.text() | any_text,
    tool_calls=st.lists(
        st.builds(ToolCall, id=st.text(max_size=8), name=any_text, arguments=any_text),
        max_size=2,
    ).map(tuple),
    stop_reason=st.text(max_size=8),
    thinking=st.lists(
        st.builds(Thinking, text=any_text, signature=st.text(max_size=8))
        | st.builds(RedactedThinking, data=st.text(max_size=8)),
        max_size=2,
    ).map(tuple),
)


def _typed_value(hint: Any, name: str) -> st.SearchStrategy[Any]:
    """Values of the field's type, over their whole range (the store takes most of them)."""
    if hint is str:
        return st.text(max_size=12) | any_text
    if hint is int:
        if name == "turn_index":
            return st.integers(0, 2**31 - 1) | st.integers(0, 3)
        return st.integers(-(2**63) + 1, 2**63 - 1) | st.integers(0, 100)
    if hint is AssistantMessage:
        return typed_messages
    return strategy_for_hint(hint)


def _events(cls: type[Any], *, hostile_fields: bool) -> st.SearchStrategy[Any]:
    hints = get_type_hints(cls)
    kwargs = {}
    for f in fields(cls):
        value = _typed_value(hints[f.name], f.name)
        if hostile_fields:
            value = st.one_of(value, value, hostile)
        if f.default is not MISSING:
            value = st.just(f.default) | value
        kwargs[f.name] = value
    return st.builds(cls, **kwargs)


def _hostile_events(cls: type[Any]) -> st.SearchStrategy[Any]:
    """Well-typed events of ``cls`` (over every value of each type), or ones with any
    field holding anything at all."""
    return _events(cls, hostile_fields=False) | _events(cls, hostile_fields=True)


any_events = st.one_of(
    *(_hostile_events(cls) for kind, cls in EVENT_TYPES.items() if kind != "run_created")
)

_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SETTINGS
@given(event=any_events)
async def test_an_appended_event_is_refused_whole_or_read_back_equal(
    store: Store, event: Any
) -> None:
    run_id = f"run-{next(_RUNS)}"
    await store.create_run(created(run_id), now=T0)
    try:
        await store.append(run_id, [event], expected_seq=1, epoch=0, status="running", now=T0)
    except InvalidEvent as exc:
        outcome(f"refused: {exc.field}")
        assert exc.kind == event.kind and exc.field in str(exc)
        assert (await store.get_run(run_id)).last_seq == 1
        assert [s.seq for s in await store.read_events(run_id)] == [1]
        return
    outcome(f"accepted: {event.kind}")
    [_, stored] = await store.read_events(run_id)
    assert stored.event == event


@_SETTINGS
@given(event=_hostile_events(RunCreated))
async def test_a_created_run_is_refused_as_the_callers_mistake_or_read_back_equal(
    store: Store, event: RunCreated
) -> None:
    # run_id is the key the test reads back by; it has to be text to be looked up at all
    if not isinstance(event.run_id, str) or "\x00" in event.run_id:
        event = RunCreated(**{**_as_kwargs(event), "run_id": f"made-{next(_RUNS)}"})
    else:
        event = RunCreated(**{**_as_kwargs(event), "run_id": f"{event.run_id}-{next(_RUNS)}"})
    try:
        await store.create_run(event, now=T0)
    except InvalidInput as exc:
        outcome(f"refused: {exc.field}")
        assert isinstance(exc, UserError) and exc.field in str(exc)
        with pytest.raises(RunNotFound):
            await store.get_run(event.run_id)
        return
    outcome("accepted")
    [stored] = await store.read_events(event.run_id)
    assert stored.event == event


def _as_kwargs(event: Any) -> dict[str, Any]:
    return {f.name: getattr(event, f.name) for f in fields(event)}


# -- the findings, named ---------------------------------------------------------------------


async def test_negative_usage_cannot_be_built_so_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="input_tokens must be a non-negative integer"):
        Usage(input_tokens=-1)
    with pytest.raises(ValueError, match="non-negative integer"):
        Usage(output_tokens=True)
    with pytest.raises(ValueError, match="non-negative integer"):
        Usage.from_json({"output_tokens": -3})


async def test_usage_that_is_not_a_usage_is_refused_and_the_log_stays_readable(
    store: Store,
) -> None:
    await store.create_run(created("run-u"), now=T0)
    bad = AssistantMessageRecorded(
        turn_index=0,
        message=AssistantMessage(text="hi"),
        usage={"input_tokens": -5},  # type: ignore[arg-type]
    )
    with pytest.raises(InvalidEvent, match="usage"):
        await store.append(
            "run-u",
            [TurnStarted(turn_index=0), bad],
            expected_seq=1,
            epoch=0,
            status="running",
            now=T0,
        )
    assert [s.seq for s in await store.read_events("run-u")] == [1]
    assert (await store.load("run-u")).record.last_seq == 1


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input", {"not": "str"}),
        ("input", "lone \ud800 surrogate"),
        ("config", {"limit": math.nan}),
        ("config", {1: "non-str key"}),
        ("session_id", "nul\x00"),
    ],
)
async def test_a_start_with_a_value_the_log_cannot_hold_is_a_user_error(
    store: Store, field: str, value: Any
) -> None:
    event = RunCreated(**{**_as_kwargs(created("run-c")), field: value})
    with pytest.raises(InvalidInput, match=field) as caught:
        await store.create_run(event, now=T0)
    assert isinstance(caught.value, UserError) and caught.value.field == field
    with pytest.raises(RunNotFound):
        await store.get_run("run-c")


async def test_runtime_start_with_an_input_that_is_not_text_is_a_user_error(store: Store) -> None:
    """Before: the run was written, and from then on rt.state and `stead runs show` raised
    CorruptEvent."""
    import stead
    from stead.testing import ScriptedModel

    agent = stead.Agent("a", ScriptedModel(["done"]), [])
    rt = stead.Runtime(store, agents=[agent])
    with pytest.raises(stead.UserError, match="input"):
        await rt.start(agent, {"not": "str"})  # type: ignore[arg-type]
    assert await store.list_runs() == []
    run_id = await rt.start(agent, "fine")
    assert (await rt.run(run_id)).status == "completed"


def test_every_golden_row_is_written_back_byte_for_byte() -> None:
    """The one codec writes the rows the hand-written codecs wrote: each row of every golden
    log, read and written again, is the same text (request digests hash the same JSON)."""
    import json

    from stead.store.sql._base import PACK_AT, decode_row, event_row, unpack_data

    logs = sorted((Path(__file__).parents[1] / "golden" / "logs").glob("*.json"))
    rows = [row for path in logs for row in json.loads(path.read_text())["rows"]]
    assert len(rows) > 100
    assert any(len(r[3]) >= PACK_AT for r in rows)  # some are stored compressed
    for seq, kind, version, text in rows:
        data = unpack_data(event_row(decode_row("r", seq, kind, version, text))[4])
        assert (data.decode() if isinstance(data, bytes) else data) == text, (kind, seq)
