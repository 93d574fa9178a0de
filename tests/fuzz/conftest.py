"""The fuzzers import the providers' wire server and shapes, and report the known findings
they hit (see ``_fuzz.KNOWN``) at the end of the session."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "providers"))
sys.path.insert(0, str(HERE))

from _fuzz import HITS, KNOWN  # noqa: E402


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not HITS:
        return
    tr = terminalreporter
    tr.section("known findings the fuzzers hit (KNOWN in tests/fuzz/_fuzz.py)")
    for finding in sorted(HITS):
        lines = [m for m in HITS[finding] if m]
        tr.write_line(f"finding {finding}: {len(HITS[finding])} example(s)")
        for m in lines:
            tr.write_line(f"    e.g. {m}")
    tr.write_line(f"still tolerated: {sorted(KNOWN)}")
