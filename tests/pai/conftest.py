"""The Pydantic AI integration's tests: skipped as a whole when the extra is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "providers"))  # the suite's wire server and shapes
