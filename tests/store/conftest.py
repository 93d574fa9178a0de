"""Fixtures of the store contract suite: every test runs once per backend in ``BACKENDS``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from _backends import BACKENDS, Backend

from stead.store import Store


@pytest.fixture(params=list(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """A fresh location on each backend (no store opened yet)."""
    where = request.getfixturevalue("pg_url") if request.param == "postgres" else tmp_path
    async with BACKENDS[request.param](where) as b:
        yield b


@pytest.fixture
def store(backend: Backend) -> Store:
    """An opened store at a fresh location; closed after the test."""
    return backend.open()


@pytest.fixture
def reopen(backend: Backend) -> Callable[[Store], Awaitable[Store]]:
    """Close a store and open its location again, as a restarted process would."""

    async def go(store: Store) -> Store:
        await backend.close(store)
        return backend.open()

    return go
