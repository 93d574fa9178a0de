"""``stead --help`` answers from the catalog of commands, without importing the runtime or
rich (it took most of a second when it built every command's parser), and says what the
whole parser says."""

from __future__ import annotations

import subprocess
import sys

from stead.cli import GROUPS, _parser
from stead.cli._catalog import COMMANDS, top_help

PROBE = """
import sys
from stead.cli import main
assert main(["--help"]) == 0
heavy = [m for m in ("rich", "stead.runtime", "stead.store", "pydantic") if m in sys.modules]
print("imported:", heavy, file=sys.stderr)
"""


def test_the_catalog_is_the_parsers_list_of_commands() -> None:
    assert tuple((c.name, c.help) for group in GROUPS for c in group) == COMMANDS
    assert top_help() == _parser().format_help()


def test_stead_help_imports_neither_rich_nor_the_runtime() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "usage: stead" in done.stdout and "serve" in done.stdout
    assert done.stderr.strip() == "imported: []"
