from __future__ import annotations

from pathlib import Path

import pytest
from _crash_harness import Scenario


@pytest.fixture
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    ledger = str(tmp_path / "ledger.db")
    monkeypatch.setenv("STEAD_TEST_EFFECTS", ledger)  # the parent reads the same ledger
    monkeypatch.delenv("STEAD_CRASH_AT", raising=False)
    return Scenario(store=str(tmp_path / "runs.db"), ledger=ledger)
