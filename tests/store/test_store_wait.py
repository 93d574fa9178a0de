"""``wait_changed``: a wake-up when a run's log grows, never a message; callers re-read."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _backends import Backend
from _builders import T0, seeded

from stead.errors import RunNotFound, StoreError
from stead.store import Store

pytestmark = pytest.mark.timeout(30)


async def test_returns_at_once_when_the_log_is_already_past(store: Store) -> None:
    b = await seeded(store, "run-1")
    assert await store.wait_changed("run-1", after_seq=1, timeout=30) == b.written
    assert await store.wait_changed("run-1", after_seq=0, timeout=0) == b.written


async def test_returns_the_unchanged_seq_when_the_timeout_passes(store: Store) -> None:
    b = await seeded(store, "run-1")
    assert await store.wait_changed("run-1", after_seq=b.written, timeout=0) == b.written
    assert await store.wait_changed("run-1", after_seq=b.written, timeout=0.05) == b.written


async def test_wakes_up_when_another_connection_appends(store: Store, backend: Backend) -> None:
    b = await seeded(store, "run-1")
    waiting = asyncio.ensure_future(store.wait_changed("run-1", after_seq=b.written, timeout=25))
    await asyncio.sleep(0)  # let it look once and start waiting
    assert not waiting.done()

    writer = backend.open()  # another connection, as another process would have
    b.final_turn()
    last = await b.flush(writer, now=T0 + 5)
    assert await waiting == last  # the test's timeout, not an assertion, bounds the wait


async def test_waiting_on_a_missing_run_is_run_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.wait_changed("nope", after_seq=0, timeout=0.01)


async def test_a_failed_read_is_a_store_error_not_a_driver_error(tmp_path: Path) -> None:
    # SQLite: the watcher's poll goes through the public API, so a driver error (here, the
    # connection is gone) must surface as StoreError, which the runtime knows to retry.
    from stead.store.sqlite import SQLiteStore

    sqlite_store = SQLiteStore(tmp_path / "runs.db")
    await seeded(sqlite_store, "run-1")
    sqlite_store._db.close()
    with pytest.raises(StoreError, match="read failed"):
        await sqlite_store.wait_changed("run-1", 0, 0.01)
