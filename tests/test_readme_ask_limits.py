"""The README's examples of issue 12's question tools, tool limits and run deadlines run."""

from __future__ import annotations

import re
from pathlib import Path

from test_readme import README, _run


def _block(marker: str) -> str:
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if marker in b]
    return block


def test_the_question_example_runs(tmp_path: Path) -> None:
    out = _run(_block("# issue 12: asking a person"), tmp_path)
    assert out.splitlines() == [
        "Standard or express shipping?",
        "refused; still waiting",
        "Shipping express.",
    ]


def test_the_tool_limits_example_runs(tmp_path: Path) -> None:
    out = _run(_block("# issue 12: tool time limits and retries"), tmp_path)
    assert out.splitlines() == ["1 EUR is 1.08 USD.", "['tool_attempt_failed']"]


def test_the_deadline_example_runs(tmp_path: Path) -> None:
    out = _run(_block("# issue 12: a run deadline"), tmp_path)
    assert out == "timed_out run"
