"""The examples of question tools, tool limits and run deadlines run and print what they say."""

from __future__ import annotations

from pathlib import Path

from test_readme import _run, block


def test_the_question_example_runs(tmp_path: Path) -> None:
    out = _run(block("ask-a-person"), tmp_path)
    assert out.splitlines() == [
        "Standard or express shipping?",
        "refused; still waiting",
        "Shipping express.",
    ]


def test_the_tool_limits_example_runs(tmp_path: Path) -> None:
    out = _run(block("tool-limits"), tmp_path)
    assert out.splitlines() == ["1 EUR is 1.08 USD.", "['tool_attempt_failed']"]


def test_the_deadline_example_runs(tmp_path: Path) -> None:
    out = _run(block("deadline"), tmp_path)
    assert out == "timed_out run"
