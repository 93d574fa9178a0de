"""The README's code runs, and its state diagram is the one the code generates."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from stead.core.states import mermaid

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_ten_line_example_runs(tmp_path: Path) -> None:
    (block,) = re.findall(r"```python\n(.*?)```", README, re.S)
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "It shipped."
    assert (tmp_path / "runs.db").exists()


def test_state_diagram_is_generated_from_the_table() -> None:
    (block,) = re.findall(r"```mermaid\n(.*?)```", README, re.S)
    assert block.strip() == mermaid().strip()
