"""Every event kind reads in the timeline through one table, and a kind with no words of its
own yet still shows every field (``generic``), so nothing falls through silently."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from stead.cli._render import DESCRIBE, STATUS_STYLE, describe, generic, timeline
from stead.core.event_codec import encode
from stead.core.events import (
    EVENT_TYPES,
    AgentChanged,
    AgentRecorded,
    EffectReconciled,
    Event,
    RedispatchRecorded,
    RunDeadlineSet,
    RunForked,
    RunRequeued,
    StepFailed,
    ToolAttemptFailed,
    ToolCallDeferred,
    ToolsListed,
    TraceLinked,
)
from stead.core.states import RunStatus
from stead.store import StoredEvent
from stead.store.sql._base import decode_row

EVERY_KIND = Path(__file__).resolve().parents[1] / "golden" / "logs" / "every_kind.json"


def _every_kind() -> list[Event]:
    """The golden log of every kind as stored, plus the kinds added after it was written."""
    doc = json.loads(EVERY_KIND.read_text())
    events = [decode_row(doc["name"], seq, k, v, data) for seq, k, v, data in doc["rows"]]
    later: list[Event] = [
        StepFailed(step="call_model (turn 0)", error_type="ValueError", message="x"),
        EffectReconciled(
            turn_index=0, attempt=1, effect_id="e1", observed="missing", verdict="dispose", epoch=2
        ),
        RedispatchRecorded(effect_id="e1", step="planned", attempt=1, epoch=2),
        ToolAttemptFailed(turn_index=0, tool_call_id="t", attempt=1, error="Boom", retry_in=0.5),
        RunDeadlineSet(deadline=1e9, counts_waiting=False),
        ToolsListed(source="files", tools={"read": {"effect_class": "read_only"}}),
        TraceLinked(traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"),
        RunForked(source_run_id="run_a", at_turn=1, carried_results=2, dropped_calls=1),
        AgentRecorded(fingerprint="fp_1", version="v1"),
        AgentChanged(from_fingerprint="fp_1", to_fingerprint="fp_2", to_version="v2"),
        ToolCallDeferred(turn_index=0, tool_call_id="t", attempt=1, ask="approval"),
    ]
    return [*events, *later]


def test_every_event_kind_renders_through_the_table() -> None:
    events = _every_kind()
    assert {e.kind for e in events} == set(EVENT_TYPES)
    assert set(DESCRIBE) <= set(EVENT_TYPES), "a renderer for a kind that does not exist"
    for e in events:
        label, detail, style = describe(e)
        assert label and style, e.kind
        # A kind with no words of its own reads through ``generic`` (adding-an-event.md).
        assert (label, detail, style) == DESCRIBE.get(e.kind, generic)(e)
    stored = [StoredEvent(seq=i, event=e, created_at=float(i)) for i, e in enumerate(events, 1)]
    out = Console(width=200, record=True)
    out.print(timeline(stored))
    assert "created" in out.export_text()


def test_a_kind_without_a_renderer_shows_every_field() -> None:
    # What a new event kind reads as until someone gives it words: its kind and its data.
    e = RunRequeued(reason="try again")
    label, detail, _ = generic(e)
    assert label == "run requeued"
    assert json.loads(detail) == encode(e)[2]
    saved = DESCRIBE.pop(e.kind)
    try:
        assert describe(e) == generic(e)
    finally:
        DESCRIBE[e.kind] = saved


def test_every_status_has_a_style() -> None:
    assert set(STATUS_STYLE) == set(RunStatus)


def test_a_field_is_put_in_a_line_as_text_never_read_as_a_template() -> None:
    # The table's lines are templates of the event; what a field holds (a prompt, a reason)
    # is its value, shortened where the line says so, never a template itself.
    from stead.core.events import RunCancelled, RunCreated

    label, detail, _ = describe(RunCreated(run_id="r", agent="a", input="{e.agent} " * 20))
    assert label == "created"
    assert detail.startswith("agent a: {e.agent} {e.agent}")
    assert detail.endswith("…") and len(detail) == len("agent a: ") + 80
    assert describe(RunCancelled(reason="{0} {e.reason!r}"))[1] == "{0} {e.reason!r}"
