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


def block(marker: str) -> str:
    """The one ```python block of the README that holds ``marker`` (in its code, or in the
    heading line just before it): found by what it shows, so sections can move and grow."""
    parts = re.findall(r"((?:^#+ [^\n]*\n\n)?)```python\n(.*?)```", README, re.S | re.M)
    found = [code for heading, code in parts if marker in heading or marker in code]
    assert len(found) == 1, f"{len(found)} README blocks hold {marker!r}"
    return found[0]


def test_the_first_example_chats_with_a_typed_answer_deps_and_a_question(tmp_path: Path) -> None:
    """The README opens with it: what a new user reads first must run as it says."""
    first = re.search(r"```python\n(.*?)```", README, re.S)
    assert first is not None and first.group(1) == block("(question,) = reply.approvals")
    assert _run(first.group(1), tmp_path).splitlines() == [
        "Order 42 has shipped.",
        "Home or office?",
        "It goes to your office.",
    ]
    assert (tmp_path / "support.db").exists()


def test_readme_examples_run(tmp_path: Path) -> None:
    ten_lines, steering = block("## Ten lines"), block("## Steering a run")
    assert _run(block("and the zip code?"), tmp_path).splitlines() == [
        "It ships to 94110.",
        "['user', 'assistant', 'user', 'assistant']",
        "0.0",
    ]
    assert _run(ten_lines, tmp_path) == "It shipped."
    assert (tmp_path / "runs.db").exists()
    assert _run(steering, tmp_path) == "Refunded."


def test_the_typed_answer_deps_and_settings_examples_run(tmp_path: Path) -> None:
    typed = block("output_type=City")
    deps = block("class Db:")
    settings = block("stead.ModelSettings(temperature=0.2)")
    assert _run(typed, tmp_path) == "75007 2"
    assert _run(deps, tmp_path) == "It shipped."
    assert _run(settings, tmp_path) == "{'temperature': 0.9, 'stop_sequences': ['\\n\\n']}"


def _blocks(section: str) -> list[str]:
    """The python blocks of one ``## section`` of the README."""
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, re.S)


def test_readme_mcp_example_runs(tmp_path: Path) -> None:
    server, agent = _blocks("MCP tools")
    (tmp_path / "orders_server.py").write_text(server)
    assert _run(agent, tmp_path).splitlines() == ["[('order_status', 'read_only')]", "It shipped."]


def test_readme_tracing_example_runs(tmp_path: Path) -> None:
    (tracing,) = _blocks("Tracing")
    names = ["chat scripted", "chat scripted", "execute_tool order_status", "invoke_agent support"]
    assert _run(tracing, tmp_path) == str(names)


def test_state_diagram_is_generated_from_the_table() -> None:
    (block,) = re.findall(r"```mermaid\n(.*?)```", README, re.S)
    assert block.strip() == mermaid().strip()
