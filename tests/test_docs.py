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
    # 110 s of the test's 120: a fresh interpreter that imports stead and its server and
    # runs a block took over 60 s beside the suite's other workers at load 20 (its output
    # was all there: it was slow, not stuck).
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_docs_have_code() -> None:
    assert len(BLOCKS) >= 2


ROOT = DOCS.parent
LINKS = [
    pytest.param(page, target, id=f"{page.name}->{target}")
    for page in sorted(DOCS.glob("*.md"))
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
    if "://" not in target
]
WRITTEN_ELSEWHERE: set[str] = set()
"""Files docs/design.md names that other branches write (docs/states.md is generated from
stead.core.states; store/sql/_store.py is the store base being merged). Until they are merged a
name of one of them is skipped, not passed; once they exist they are checked like any other,
so this set may then be emptied."""


@pytest.mark.parametrize(("page", "target"), LINKS)
def test_doc_links_resolve(page: Path, target: str) -> None:
    path = (page.parent / target).resolve()
    if not path.exists() and target in WRITTEN_ELSEWHERE:
        pytest.skip(f"docs/{target} is written by another branch")
    assert path.exists(), f"{page.name} links to {target}, which does not exist"


PACKAGES = "core|runtime|store|tools|providers|server|cli|testing|demo"
NAMED = re.findall(
    rf"`((?:src/|tests/|docs/|bench/|stead/|(?:{PACKAGES})/)[\w./-]+)`",
    (DOCS / "design.md").read_text(),
)


def _file(named: str) -> Path:
    """The file a name in docs/design.md means: ``tests/golden/logs/``, ``core/fold.py``
    (under src/stead), ``stead/core/states.py`` (under src), ``core/builders.unique_call_ids``
    (a name in core/builders.py)."""
    if named.startswith(tuple(f"{p}/" for p in PACKAGES.split("|"))):
        named = f"src/stead/{named}"
    elif named.startswith("stead/"):
        named = f"src/{named}"
    head, slash, tail = named.rpartition("/")
    if "." in tail and not tail.endswith((".py", ".md", ".toml", ".json", ".sql")):
        tail = tail.split(".")[0] + ".py"
    path = ROOT / head / tail if slash else ROOT / named
    if path.suffix == ".py" and not path.exists() and path.with_suffix("").is_dir():
        return path.with_suffix("") / "__init__.py"  # a module that grew into a package
    return path


@pytest.mark.parametrize("named", sorted(set(NAMED)))
def test_design_names_real_files(named: str) -> None:
    """docs/design.md names the modules and tests that make and show each claim; a file
    renamed or removed must not leave it pointing at nothing."""
    if not _file(named).exists() and named in WRITTEN_ELSEWHERE:
        pytest.skip(f"{named} is written by another branch")
    assert _file(named).exists(), f"docs/design.md names {named}, which does not exist"


def test_design_names_files() -> None:
    assert len(set(NAMED)) >= 20
