"""The fenced message service of docs/recovery.md, loaded from the page itself, so that the
service the tests run is the one the page shows (``INBOX_DB`` names its SQLite file)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "recovery.md"
FIRST_LINE = "# fenced_service.py"


def service() -> types.ModuleType:
    """The page's ``fenced_service.py`` block as a module (loaded once per process)."""
    loaded = sys.modules.get("fenced_service")
    if loaded is not None:
        return loaded
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    [block] = [b for b in blocks if b.startswith(FIRST_LINE)]
    module = types.ModuleType("fenced_service")
    module.__file__ = str(PAGE)
    sys.modules["fenced_service"] = module
    exec(compile(block, str(PAGE), "exec"), module.__dict__)
    return module
