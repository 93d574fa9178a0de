"""The README's code runs, and its state diagram is the one the code generates."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from stead.core.states import mermaid

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _run(block: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
OUTPUT_DEPS_SETTINGS = 3
"""Issue 12's sections (typed answers, deps, settings): the blocks after "Steering a run"."""


def test_readme_examples_run(tmp_path: Path) -> None:
    ten_lines, steering = BLOCKS[:2]
    assert _run(ten_lines, tmp_path) == "It shipped."
    assert (tmp_path / "runs.db").exists()
    assert _run(steering, tmp_path) == "Refunded."


def test_the_typed_answer_deps_and_settings_examples_run(tmp_path: Path) -> None:
    typed, deps, settings = BLOCKS[2 : 2 + OUTPUT_DEPS_SETTINGS]
    assert _run(typed, tmp_path) == "75007 2"
    assert _run(deps, tmp_path) == "It shipped."
    assert _run(settings, tmp_path) == "{'temperature': 0.9, 'stop_sequences': ['\\n\\n']}"


def test_state_diagram_is_generated_from_the_table() -> None:
    (block,) = re.findall(r"```mermaid\n(.*?)```", README, re.S)
    assert block.strip() == mermaid().strip()
