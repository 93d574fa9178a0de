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
    ten_lines, steering = re.findall(r"```python\n(.*?)```", README, re.S)[:2]
    assert _run(ten_lines, tmp_path) == "It shipped."
    assert (tmp_path / "runs.db").exists()
    assert _run(steering, tmp_path) == "Refunded."


def _blocks(section: str) -> list[str]:
    """The python blocks of one ``## section`` of the README."""
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, re.S)


def test_readme_mcp_example_runs(tmp_path: Path) -> None:
    server, agent = _blocks("MCP tools")
    (tmp_path / "orders_server.py").write_text(server)
    assert _run(agent, tmp_path).splitlines() == ["[('order_status', 'read_only')]", "It shipped."]


def test_readme_tracing_example_runs(tmp_path: Path) -> None:
    (block,) = _blocks("Tracing")
    names = ["chat scripted", "chat scripted", "execute_tool order_status", "invoke_agent support"]
    assert _run(block, tmp_path) == str(names)


def test_state_diagram_is_generated_from_the_table() -> None:
    (block,) = re.findall(r"```mermaid\n(.*?)```", README, re.S)
    assert block.strip() == mermaid().strip()
