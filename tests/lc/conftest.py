"""The LangChain integration's tests. Each module skips itself (``importorskip``
before its imports) when the langchain extra is not installed; a skip here, in a
conftest, would stop the whole run instead."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "providers"))  # the suite's wire server and shapes
sys.path.insert(0, str(HERE.parent / "foreign"))  # the crash harness the integrations share
