"""Code stays small enough to read in one sitting: no file in src/ over 600 lines,
no function in the pure core over 80."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "stead"


def test_no_source_file_is_over_600_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600
    }
    assert long == {}


def test_no_core_function_is_over_80_lines() -> None:
    long = {}
    for p in (SRC / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 80:
                    long[f"{p.relative_to(SRC)}:{node.name}"] = lines
    assert long == {}


def test_test_modules_have_unique_names() -> None:
    """pytest imports a test directory's modules by their bare names (no packages under
    tests/), so two files of one name in two directories collide: the second is refused at
    collection ("import file mismatch") or imports the other's helpers."""
    tests = Path(__file__).resolve().parent
    seen: dict[str, list[str]] = {}
    for p in tests.rglob("*.py"):
        if p.name != "conftest.py" and "fixtures" not in p.parts:
            seen.setdefault(p.name, []).append(str(p.relative_to(tests)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
