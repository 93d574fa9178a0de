"""Statements SQLite runs for one store call, counted through its trace hook (never timed)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _builders import T0, created

from stead.store import SQLiteStore, Store


async def test_last_seqs_of_many_runs_is_one_statement(store: Store) -> None:
    """A worker's keeper asks for every held run's position each watch interval: one
    statement for all of them, not one a run. Runs that do not exist are left out."""
    if not isinstance(store, SQLiteStore):
        pytest.skip("SQLite only (PostgreSQL's is one statement too)")
    for i in range(30):
        await store.create_run(created(f"run-{i}"), now=T0)
    seen: list[str] = []

    def hook() -> Callable[[str], None]:
        return seen.append

    store._trace(hook)
    asked = [f"run-{i}" for i in range(0, 30, 2)] + ["nobody", 'it\'s "quoted"']
    assert await store.last_seqs(asked) == {f"run-{i}": 1 for i in range(0, 30, 2)}
    assert len(seen) == 1
    assert await store.last_seqs([]) == {}
    assert len(seen) == 1
