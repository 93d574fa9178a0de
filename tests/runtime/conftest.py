from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _crash_harness import Scenario


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store's URL, once per backend: a SQLite file of the test's own, or a schema of its
    own on the run's PostgreSQL (a module that defines its own ``url`` uses that)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    ledger = str(tmp_path / "ledger.db")
    monkeypatch.setenv("STEAD_TEST_EFFECTS", ledger)  # the parent reads the same ledger
    monkeypatch.delenv("STEAD_CRASH_AT", raising=False)
    return Scenario(store=str(tmp_path / "runs.db"), ledger=ledger)
