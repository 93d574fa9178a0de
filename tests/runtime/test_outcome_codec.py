"""The sealed outcome on the wire (``settled{outcome}`` in the ledger, an executor's answer
over HTTP), as a table: every kind round-trips with exactly its own fields, and an outcome
whose kind and fields disagree is refused on decode, as an assignment's kind and body are
(tests/core/test_effects.py), never read as some other outcome."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stead.core.effects import (
    Cancelled,
    ModelFailed,
    ModelSucceeded,
    ToolFailed,
    ToolSucceeded,
    ToolUnknown,
)
from stead.core.messages import AssistantMessage, Usage
from stead.providers import ModelResponse
from stead.runtime.executors._store_executor import outcome_from_json, outcome_to_json

REPLY = ModelResponse(
    message=AssistantMessage(text="hi"),
    usage=Usage(input_tokens=3, output_tokens=1),
    model="m1",
)
OUTCOMES = [
    ModelSucceeded(response=REPLY),
    ModelFailed(code="rate_limited", message="slow down", retry_after=2.5, usage=Usage()),
    ModelFailed(code="bad_request", message="no"),
    ToolSucceeded(content='{"ok": true}'),
    ToolFailed(failure="boom", retry=True),
    ToolUnknown(reason="its executor died mid-call"),
    Cancelled(reason="the run was cancelled"),
    Cancelled(),
]


@pytest.mark.parametrize("outcome", OUTCOMES, ids=lambda o: o.kind)
def test_every_outcome_round_trips_through_json(outcome: Any) -> None:
    wired = json.loads(json.dumps(outcome_to_json(outcome)))
    assert wired["kind"] == outcome.kind
    assert outcome_from_json(wired) == outcome


MESSAGE = outcome_to_json(ModelSucceeded(response=REPLY))["message"]


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "tool_succeeded", "content": "x", "code": "rate_limited"},
        {"kind": "tool_succeeded", "content": "x", "message": MESSAGE},
        {"kind": "model_failed", "code": "bad_request", "message": "m", "content": "x"},
        {"kind": "model_succeeded", "message": MESSAGE, "usage": {}, "failure": "f"},
        {"kind": "tool_failed", "failure": "f", "retry": False, "reason": "r"},
        {"kind": "tool_unknown", "reason": "r", "content": "x"},
        {"kind": "cancelled", "reason": "r", "outcome": {"kind": "tool_succeeded"}},
    ],
    ids=[
        "tool-succeeded-with-a-code",
        "tool-succeeded-with-a-message",
        "model-failed-with-content",
        "model-succeeded-with-a-failure",
        "tool-failed-with-a-reason",
        "tool-unknown-with-content",
        "cancelled-with-a-nested-outcome",
    ],
)
def test_a_kind_that_disagrees_with_its_fields_is_refused(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="does not match its kind"):
        outcome_from_json(data)
