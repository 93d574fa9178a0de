"""Code blocks in docs/ run (pydantic-ai's tests/test_examples.py does the same), links
resolve, every guide is reachable from the README, and nothing in the product speaks of the
team's process.

A block tagged ``<!-- test: name -->`` is run by ``tests/test_readme.py``, which also checks
what it prints; every other ``python`` block of docs/ is run here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
README = DOCS.parent / "README.md"
BLOCKS = [
    pytest.param(block, id=f"{page.name}#{i}")
    for page in sorted(DOCS.glob("*.md"))
    for i, (tag, block) in enumerate(
        re.findall(r"(<!-- test: [\w-]+ -->\n)?```python\n(.*?)```", page.read_text(), re.S)
    )
    if not tag
]


@pytest.mark.parametrize("block", BLOCKS)
def test_doc_block_runs(block: str, tmp_path: Path) -> None:
    # 110 s of the test's 120: a fresh interpreter imports stead (and its server) before it
    # runs the block, which beside the suite's other workers may take over a minute.
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
    for page in [README, *sorted(DOCS.glob("*.md"))]
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
    if "://" not in target
]


@pytest.mark.parametrize(("page", "target"), LINKS)
def test_doc_links_resolve(page: Path, target: str) -> None:
    path = (page.parent / target).resolve()
    assert path.exists(), f"{page.name} links to {target}, which does not exist"


def _linked(page: Path) -> set[Path]:
    """The markdown pages ``page`` links to."""
    targets = re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)", page.read_text())
    return {(page.parent / t).resolve() for t in targets if "://" not in t}


def test_the_readme_is_read_in_one_sitting() -> None:
    assert len(README.read_text().splitlines()) <= 400


def test_every_guide_is_reachable_from_the_readme() -> None:
    """Linked from the README itself, or from the docs index the README links to."""
    index = (DOCS / "index.md").resolve()
    assert index in _linked(README)
    reachable = _linked(README) | _linked(index)
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in reachable | {index}]
    assert not missing, f"not linked from README.md or docs/index.md: {missing}"


def test_no_process_residue() -> None:
    """The product speaks of itself: no issue or session numbers of the team that builds it
    in the code, the docs, the tests or the benchmarks (tracked files)."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["src", "docs", "README.md", "tests", "bench"]
    done = subprocess.run(
        [git, "grep", "-nIiE", r"\bissues? [0-9]+|\bsessions? [0-9]+", "--", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # 1: no line matched


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
    assert _file(named).exists(), f"docs/design.md names {named}, which does not exist"


def test_design_names_files() -> None:
    assert len(set(NAMED)) >= 20
