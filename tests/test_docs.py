"""Code blocks in docs/ run (pydantic-ai's tests/test_examples.py does the same)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCKS = [
    pytest.param(block, id=f"{page.name}#{i}")
    for page in sorted(DOCS.glob("*.md"))
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
]


@pytest.mark.parametrize("block", BLOCKS)
def test_doc_block_runs(block: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_docs_have_code() -> None:
    assert len(BLOCKS) >= 2
