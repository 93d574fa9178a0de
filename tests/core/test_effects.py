"""Effects as data: assignments on the wire, outcomes, failure codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_strategies import json_objects
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.core.effects import (
    REPLAY_POLICY,
    Assignment,
    AssignmentKey,
    Cancelled,
    ModelBody,
    ModelFailed,
    ModelSucceeded,
    ToolBody,
    ToolFailed,
    ToolSucceeded,
    ToolUnknown,
    assignment_from_json,
    assignment_to_json,
    tool_result_of,
)
from stead.core.failures import MODEL_FAILURE_CODES, RETRYABLE, code_for_status, is_retryable

# -- assignments -----------------------------------------------------------------------------

keys = st.builds(
    AssignmentKey, session_id=st.text(max_size=8), run_id=st.text(max_size=8), effect_id=st.text()
)
model_bodies = st.builds(
    ModelBody, model=st.text(max_size=8), request=json_objects, request_digest=st.text(max_size=64)
)


@st.composite
def tool_bodies(draw: st.DrawFn) -> ToolBody:
    effect = draw(st.sampled_from(["read_only", "idempotent_write", "non_idempotent"]))
    return ToolBody(
        tool_name=draw(st.text(max_size=8)),
        definition_digest=draw(st.text(max_size=64)),
        arguments=draw(st.text()),
        effect_class=effect,
        replay_policy=REPLAY_POLICY[effect],
        tool_call_id=draw(st.text(max_size=8)),
        turn_index=draw(st.integers(0, 10**6)),
        idempotency_key=draw(st.text(max_size=64)),
        attempt=draw(st.integers(1, 100)),
    )


assignments = st.builds(Assignment, key=keys, body=model_bodies | tool_bodies())


@settings(max_examples=80, deadline=None)
@given(assignments)
def test_assignment_round_trip(a: Assignment) -> None:
    data = assignment_to_json(a)
    assert data["kind"] == a.kind
    assert set(data) == {"kind", "key", a.kind}
    wired = json.loads(json.dumps(data))
    assert assignment_from_json(wired) == a
    assert assignment_from_json(data) == a


def test_assignment_kind_follows_the_body() -> None:
    key = AssignmentKey(session_id="s", run_id="r", effect_id="e")
    model = Assignment(key=key, body=ModelBody(model="m", request={}, request_digest="d"))
    assert model.kind == "model"
    tool = Assignment(key=key, body=_tool_body())
    assert tool.kind == "tool"


def _tool_body(effect: Any = "non_idempotent") -> ToolBody:
    return ToolBody(
        tool_name="pay",
        definition_digest="dd",
        arguments='{"amount":5}',
        effect_class=effect,
        replay_policy=REPLAY_POLICY[effect],
        tool_call_id="c",
        turn_index=1,
        idempotency_key="k",
        attempt=2,
    )


KEY = {"session_id": "s", "run_id": "r", "effect_id": "e"}
MODEL = {"model": "m", "request": {"messages": []}, "request_digest": "d"}
TOOL = assignment_to_json(
    Assignment(key=AssignmentKey(session_id="s", run_id="r", effect_id="e"), body=_tool_body())
)["tool"]


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "model", "key": KEY, "tool": TOOL},
        {"kind": "tool", "key": KEY, "model": MODEL},
        {"kind": "model", "key": KEY, "model": MODEL, "tool": TOOL},
        {"kind": "tool", "key": KEY, "model": MODEL, "tool": TOOL},
        {"kind": "model", "key": KEY},
        {"kind": "tool", "key": KEY},
        {"key": KEY, "model": MODEL},
        {"kind": "shell", "key": KEY, "shell": {}},
        {"kind": None, "key": KEY, "tool": TOOL},
    ],
    ids=[
        "model-kind-tool-body",
        "tool-kind-model-body",
        "both-bodies-model",
        "both-bodies-tool",
        "no-body-model",
        "no-body-tool",
        "no-kind",
        "unknown-kind",
        "null-kind",
    ],
)
def test_kind_and_body_must_agree(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="does not match its body"):
        assignment_from_json(data)


def test_replay_policy_table() -> None:
    assert REPLAY_POLICY == {
        "read_only": "rerun",
        "idempotent_write": "rerun_with_key",
        "non_idempotent": "reconcile_or_ask",
    }


@pytest.mark.parametrize(
    ("effect", "policy"),
    [
        (effect, policy)
        for effect in REPLAY_POLICY
        for policy in ("rerun", "rerun_with_key", "reconcile_or_ask", "yolo")
        if policy != REPLAY_POLICY[effect]  # type: ignore[index]
    ],
)
def test_replay_policy_must_follow_the_effect_class(effect: str, policy: str) -> None:
    data = {
        "kind": "tool",
        "key": KEY,
        "tool": TOOL | {"effect_class": effect, "replay_policy": policy},
    }
    # a policy that exists is checked against the class; one that does not, by its type
    with pytest.raises(
        ValueError, match=r"replay policy does not match the effect class|'yolo' not one of"
    ):
        assignment_from_json(data)


def test_unknown_effect_class() -> None:
    data = {"kind": "tool", "key": KEY, "tool": TOOL | {"effect_class": "mostly_harmless"}}
    with pytest.raises(ValueError, match="field 'effect_class': 'mostly_harmless' not one of"):
        assignment_from_json(data)


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "model", "model": MODEL},
        {"kind": "model", "key": {"run_id": "r", "effect_id": "e"}, "model": MODEL},
        {"kind": "model", "key": KEY, "model": {"model": "m", "request_digest": "d"}},
        {"kind": "tool", "key": KEY, "tool": {k: v for k, v in TOOL.items() if k != "attempt"}},
    ],
    ids=["no-key", "key-without-session", "model-without-request", "tool-without-attempt"],
)
def test_missing_field_is_a_value_error(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        assignment_from_json(data)


# -- failure codes ---------------------------------------------------------------------------

# docs/design.md, "Failure codes".
DESIGN_MODEL_CODES = {
    "rate_limited",
    "authentication_failed",
    "billing",
    "provider_unavailable",
    "bad_request",
    "context_length_exceeded",
    "connection_failed",
    "deadline_exceeded",
    "malformed_result",
    "executor_error",
}
# deadline_exceeded is among them: a timeout is worth another attempt,
# bounded by Limits.max_model_attempts and each attempt by the provider's deadline.
DESIGN_RETRYABLE = {
    "rate_limited",
    "provider_unavailable",
    "connection_failed",
    "deadline_exceeded",
}


def test_model_failure_codes_are_designs() -> None:
    assert set(MODEL_FAILURE_CODES) == DESIGN_MODEL_CODES
    assert set(RETRYABLE) == DESIGN_RETRYABLE


@pytest.mark.parametrize("code", sorted(DESIGN_MODEL_CODES))
def test_retryable_derives_from_the_code(code: str) -> None:
    failed = ModelFailed(code=code, message="x")
    assert failed.retryable is (code in DESIGN_RETRYABLE)
    assert is_retryable(code) is failed.retryable
    assert "retryable" not in {f for f in ModelFailed.__dataclass_fields__}  # never stored


@pytest.mark.parametrize("code", ["", "teapot", "RATE_LIMITED", "tool_error", "max_turns"])
def test_model_failed_refuses_an_unknown_code(code: str) -> None:
    with pytest.raises(ValueError, match="unknown model failure code"):
        ModelFailed(code=code)


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (429, "rate_limited"),
        (401, "authentication_failed"),
        (403, "authentication_failed"),
        (402, "billing"),
        (500, "provider_unavailable"),
        (502, "provider_unavailable"),
        (503, "provider_unavailable"),
        (504, "provider_unavailable"),
        (529, "provider_unavailable"),  # Anthropic "overloaded"
        (400, "bad_request"),
        (404, "bad_request"),
        (409, "bad_request"),
        (413, "bad_request"),
        (422, "bad_request"),
        (408, "deadline_exceeded"),
    ],
)
def test_code_for_status(status: int, code: str) -> None:
    assert code_for_status(status) == code
    assert code in MODEL_FAILURE_CODES
    assert is_retryable(code_for_status(status)) is (code in DESIGN_RETRYABLE)


@settings(deadline=None)
@given(st.integers(400, 599))
def test_every_error_status_has_a_known_code(status: int) -> None:
    assert code_for_status(status) in MODEL_FAILURE_CODES


# -- outcomes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (ToolSucceeded(content='{"ok":true}'), ('{"ok":true}', False)),
        (ToolFailed(failure="card declined", retry=True), ("card declined", True)),
        (ToolFailed(failure="no such file"), ("no such file", True)),
        (Cancelled(reason="user stop"), ("cancelled: user stop", True)),
        (ToolUnknown(reason="worker died mid-call"), None),
    ],
    ids=lambda v: getattr(v, "kind", None) or "",
)
def test_tool_result_of(outcome: Any, expected: tuple[str, bool] | None) -> None:
    assert tool_result_of(outcome) == expected


@pytest.mark.parametrize(
    "outcome",
    [ModelSucceeded(response={"text": "hi"}), ModelFailed(code="rate_limited")],
    ids=lambda o: o.kind,
)
def test_a_model_outcome_is_not_a_tool_result(outcome: Any) -> None:
    with pytest.raises(ValueError, match="not a tool result"):
        tool_result_of(outcome)


def test_outcome_tags() -> None:
    assert [
        o.kind
        for o in (
            ModelSucceeded(response=None),
            ModelFailed(code="billing"),
            ToolSucceeded(content=""),
            ToolFailed(failure=""),
            ToolUnknown(reason=""),
            Cancelled(),
        )
    ] == [
        "model_succeeded",
        "model_failed",
        "tool_succeeded",
        "tool_failed",
        "tool_unknown",
        "cancelled",
    ]
