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


def test_readme_examples_run(tmp_path: Path) -> None:
    ten_lines, steering, *_ = re.findall(r"```python\n(.*?)```", README, re.S)
    assert _run(ten_lines, tmp_path) == "It shipped."
    assert (tmp_path / "runs.db").exists()
    assert _run(steering, tmp_path) == "Refunded."


def test_state_diagram_is_generated_from_the_table() -> None:
    (block,) = re.findall(r"```mermaid\n(.*?)```", README, re.S)
    assert block.strip() == mermaid().strip()
