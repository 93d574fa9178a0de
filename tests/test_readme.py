"""The README's and the guides' tagged examples run and print what they say, and the README's
state diagram is the one the code generates.

A block a test checks is tagged with an HTML comment on the line before it
(``<!-- test: steering -->``): the reader of the rendered page does not see it, and the block
is found by its tag wherever it moves, in the README or in a page of ``docs/``. Blocks without
a tag are run by ``tests/test_docs.py``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from stead.core.states import mermaid

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TAGGED = re.compile(r"^<!-- test: ([\w-]+) -->\n```python\n(.*?)```", re.S | re.M)

CHECKED = {
    "first-example",
    "ten-lines",
    "conversation",
    "steering",
    "typed-answer",
    "dependencies",
    "model-settings",
    "ask-a-person",
    "tool-limits",
    "deadline",
    "mcp-server",
    "mcp-agent",
    "tracing",
}
"""Every tag a test below looks up: a tagged block no test checks would run nowhere."""


def _tagged() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for tag, code in TAGGED.findall(page.read_text()):
            found.setdefault(tag, []).append(code)
    return found


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


def block(tag: str) -> str:
    """The one ```python block tagged ``tag``, in the README or any page of docs/."""
    assert tag in CHECKED, f"add {tag!r} to CHECKED"
    found = _tagged().get(tag, [])
    assert len(found) == 1, f"{len(found)} blocks are tagged {tag!r}"
    return found[0]


def test_every_tag_is_checked_and_every_readme_block_tagged() -> None:
    """A tag no test looks up, or a README block with no tag, is a block nothing runs."""
    assert set(_tagged()) == CHECKED
    assert all(len(codes) == 1 for codes in _tagged().values())
    blocks = re.findall(r"```python\n", README)
    assert len(blocks) == len(TAGGED.findall(README)) >= 4


def test_the_first_example_chats_with_a_typed_answer_deps_and_a_question(tmp_path: Path) -> None:
    """The README opens with it: what a new user reads first must run as it says."""
    first = re.search(r"```python\n(.*?)```", README, re.S)
    assert first is not None and first.group(1) == block("first-example")
    assert _run(first.group(1), tmp_path).splitlines() == [
        "Order 42 has shipped.",
        "Home or office?",
        "It goes to your office.",
    ]
    assert (tmp_path / "support.db").exists()
    # Run again in the same folder: the same message ids find the same runs, already answered.
    assert _run(first.group(1), tmp_path).splitlines() == [
        "Order 42 has shipped.",
        "It goes to your office.",
    ]


def test_the_tour_examples_run(tmp_path: Path) -> None:
    assert _run(block("conversation"), tmp_path).splitlines() == [
        "It ships to 94110.",
        "['user', 'assistant', 'user', 'assistant']",
        "0.0",
    ]
    assert _run(block("ten-lines"), tmp_path) == "It shipped."
    assert (tmp_path / "runs.db").exists()
    assert _run(block("steering"), tmp_path) == "Refunded."


def test_the_typed_answer_deps_and_settings_examples_run(tmp_path: Path) -> None:
    assert _run(block("typed-answer"), tmp_path) == "75007 2"
    assert _run(block("dependencies"), tmp_path) == "It shipped."
    settings = _run(block("model-settings"), tmp_path)
    assert settings == "{'temperature': 0.9, 'stop_sequences': ['\\n\\n']}"


def test_the_mcp_example_runs(tmp_path: Path) -> None:
    (tmp_path / "orders_server.py").write_text(block("mcp-server"))
    assert _run(block("mcp-agent"), tmp_path).splitlines() == [
        "[('order_status', 'read_only')]",
        "It shipped.",
    ]


def test_the_tracing_example_runs(tmp_path: Path) -> None:
    names = ["chat scripted", "chat scripted", "execute_tool order_status", "invoke_agent support"]
    assert _run(block("tracing"), tmp_path) == str(names)


def test_state_diagram_is_generated_from_the_table() -> None:
    (diagram,) = re.findall(r"```mermaid\n(.*?)```", README, re.S)
    assert diagram.strip() == mermaid().strip()
