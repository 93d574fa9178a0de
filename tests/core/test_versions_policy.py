"""Agent versions (``stead.core.versions``): the verdict of each policy, the calls a changed
tool can no longer take, and fingerprints that are stable and sensitive."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stead.core.versions import OpenCall, broken_calls, fingerprint, verdict

VERDICTS = [
    ("", "fp_a", "continue", "record"),
    ("", "fp_a", "pin", "record"),
    ("", "fp_a", "fail", "record"),
    ("fp_a", "fp_a", "continue", "same"),
    ("fp_a", "fp_a", "pin", "same"),
    ("fp_a", "fp_a", "fail", "same"),
    ("fp_a", "fp_b", "continue", "changed"),
    ("fp_a", "fp_b", "pin", "leave"),
    ("fp_a", "fp_b", "fail", "fail"),
]


@pytest.mark.parametrize(("recorded", "mine", "policy", "expected"), VERDICTS)
def test_each_policy(recorded: str, mine: str, policy: str, expected: str) -> None:
    assert verdict(recorded, mine, policy) == expected  # type: ignore[arg-type]


def test_calls_a_changed_agent_cannot_take() -> None:
    def needs_reason(arguments: str) -> str | None:
        return None if "reason" in arguments else "reason: field required"

    calls = [
        OpenCall(tool_call_id="c1", name="refund", arguments='{"reason":"x"}'),
        OpenCall(tool_call_id="c2", name="refund", arguments="{}"),
        OpenCall(tool_call_id="c3", name="gone", arguments="{}"),
    ]
    problems = broken_calls(calls, {"refund": needs_reason})
    assert len(problems) == 2
    assert "c2" in problems[0] and "reason: field required" in problems[0]
    assert "c3" in problems[1] and "no longer has" in problems[1]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(JSON, JSON)
def test_a_fingerprint_is_stable_and_tells_descriptions_apart(a: object, b: object) -> None:
    assert fingerprint(a) == fingerprint(a)  # type: ignore[arg-type]
    assert fingerprint(a).startswith("fp_") and len(fingerprint(a)) == 19  # type: ignore[arg-type]
    if a != b:
        assert fingerprint(a) != fingerprint(b)  # type: ignore[arg-type]
