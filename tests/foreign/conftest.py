"""The shared tests of the framework integrations: the suite's wire server and shapes on the
path, as each integration's own conftest puts them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "providers"))
