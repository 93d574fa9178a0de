"""The core is pure: no I/O, no asyncio, no clock, no randomness; it imports only down.

Checked on the source itself (the AST of every file in src/stead/core), so a new module is
covered the day it is added.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

# It names subprocess and multiprocessing only to refuse them in the core: no process here.
pytestmark = pytest.mark.fast

# Found without importing stead: the check holds even when the package does not import.
_SPEC = importlib.util.find_spec("stead")
assert _SPEC is not None and _SPEC.submodule_search_locations
CORE = Path(next(iter(_SPEC.submodule_search_locations))) / "core"
FILES = sorted(CORE.rglob("*.py"))

PURE_STDLIB = {
    "__future__",
    "abc",
    "base64",
    "binascii",
    "bisect",
    "collections",
    "collections.abc",
    "copy",
    "dataclasses",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "graphlib",
    "hashlib",
    "heapq",
    "hmac",
    "itertools",
    "json",
    "json.encoder",
    "math",
    "numbers",
    "operator",
    "re",
    "string",
    "struct",
    "textwrap",
    "types",
    "typing",
    "unicodedata",
}
THIRD_PARTY = {"rfc8785"}
OURS = {"stead.errors"}

# Named explicitly so a failure reads well; anything not allowed above fails anyway.
FORBIDDEN = {
    "asyncio",
    "concurrent",
    "datetime",
    "http",
    "importlib",
    "io",
    "logging",
    "multiprocessing",
    "os",
    "pathlib",
    "random",
    "secrets",
    "select",
    "selectors",
    "shutil",
    "signal",
    "socket",
    "sqlite3",
    "subprocess",
    "sys",
    "tempfile",
    "threading",
    "time",
    "urllib",
    "uuid",
    "psycopg",
    "httpx",
    "pydantic",
    "anthropic",
    "openai",
    "rich",
}
# Names whose attributes are a clock, randomness or the outside world when called.
IMPURE_ROOTS = {"time", "datetime", "random", "uuid", "os", "secrets", "socket", "sqlite3"}
IMPURE_BUILTINS = {"open", "input", "print", "__import__", "exec", "eval", "breakpoint"}
GENERATES_CODE = {"codegen.py": {"exec"}}
"""The one exception, by file: the codec's generator compiles the check and the encoder of a
record from its own templates and the record's field names (no data, no I/O, no clock)."""


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = "stead.core"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against stead.core
                base = package.rsplit(".", node.level - 1)[0]
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def _allowed(module: str) -> bool:
    if module.split(".")[0] in FORBIDDEN:
        return False
    if module == "stead.core" or module.startswith("stead.core."):
        return True
    return module in OURS or module in PURE_STDLIB or module in THIRD_PARTY


def test_the_core_has_files() -> None:
    names = {p.name for p in FILES}
    assert {"states.py", "events.py", "fold.py", "decide.py", "canonical.py"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_imports_are_pure(path: Path) -> None:
    bad = [
        f"{path.name}:{line} imports {module}"
        for line, module in _imports(path)
        if not _allowed(module)
    ]
    assert bad == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_clock_randomness_or_io_calls(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in IMPURE_BUILTINS
            and func.id not in GENERATES_CODE.get(path.name, ())
        ):
            bad.append(f"{path.name}:{node.lineno} calls {func.id}()")
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if (
            isinstance(func, ast.Attribute)
            and isinstance(root, ast.Name)
            and root.id in IMPURE_ROOTS
        ):
            bad.append(f"{path.name}:{node.lineno} calls {ast.unparse(func)}()")
    assert bad == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import time", ["time"]),
        ("from datetime import datetime", ["datetime"]),
        ("import os.path", ["os.path"]),
        ("from stead.store import sqlite", ["stead.store"]),
        ("def f():\n    import random\n", ["random"]),
        ("from . import fold", ["stead.core"]),
        ("from .events import decode", ["stead.core.events"]),
        ("from .. import errors", ["stead"]),
    ],
)
def test_the_checker_sees_every_import(tmp_path: Path, source: str, expected: list[str]) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    assert [m for _, m in _imports(path)] == expected


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        ("stead.core.events", True),
        ("stead.errors", True),
        ("rfc8785", True),
        ("typing", True),
        ("collections.abc", True),
        ("stead", False),
        ("stead.store", False),
        ("stead.runtime.loop._loop", False),
        ("stead.tools", False),
        ("stead.providers.anthropic", False),
        ("stead.cli", False),
        ("time", False),
        ("datetime", False),
        ("random", False),
        ("os.path", False),
        ("asyncio", False),
        ("sqlite3", False),
        ("threading", False),
        ("subprocess", False),
        ("socket", False),
        ("pydantic", False),
    ],
)
def test_the_checker_judges(module: str, allowed: bool) -> None:
    assert _allowed(module) is allowed


@pytest.mark.parametrize(
    "source",
    [
        "time.time()",
        "datetime.datetime.now()",
        "datetime.now()",
        "random.random()",
        "uuid.uuid4()",
        "os.urandom(8)",
        "open('x')",
    ],
)
def test_the_checker_sees_impure_calls(tmp_path: Path, source: str) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    with pytest.raises(AssertionError):
        test_no_clock_randomness_or_io_calls(path)


def _core_module(path: Path) -> str:
    parts = path.relative_to(CORE).with_suffix("").parts
    return ".".join(("stead.core", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def test_core_modules_import_one_way() -> None:
    # No cycle between the core's modules (fold once imported handlers at its end to
    # register them while handlers imported fold): each dependency is one-way, so either
    # module can be read, and imported, on its own. A package's __init__ is left out: it is
    # where a package gathers its modules.
    modules = {_core_module(p): p for p in FILES if p.name != "__init__.py"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level: an import inside a function runs later
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                deps |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[name] = {d for d in deps if d in modules and d != name}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join((*path[path.index(name) :], name))
        if name not in done:
            for dep in sorted(graph[name]):
                visit(dep, (*path, name))
            done.add(name)

    for name in sorted(graph):
        visit(name, ())
    assert "stead.core.fold" in graph["stead.core.handlers"]
