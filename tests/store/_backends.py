"""The backends the store contract suite runs on.

Each backend is a factory: an async context manager that, given a temporary directory,
yields a ``Backend`` at a fresh, empty location and closes every store opened on it when
the test ends. SQLite's location is a temporary directory; PostgreSQL's is a fresh schema on
the session's server (the ``pg_url`` fixture), ``raw`` through psycopg with ``?`` rewritten
to ``%s``.

Tests use the ``store`` fixture (an opened Store) and, when they must reach past the
contract (a second connection, a child process, corrupting a row by hand), ``backend``.
This is the one harness of ``tests/store``: every file takes its backends from here.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stead.store import SQLiteStore, Store

CHILD = Path(__file__).parent / "_child.py"
"""The helper script child processes run."""


@dataclass
class Backend:
    """A store location, and the ways a test may reach it besides the contract."""

    name: str
    """The backend's id (the test id suffix)."""
    url: str
    """What ``stead.store.open_store`` opens; handed to child processes."""
    opener: Callable[..., Store]
    """Open one more store on this location (applies migrations when it is new), with the
    store's keyword options (``poll_interval`` and ``before_commit`` on both)."""
    raw: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
    """Run one SQL statement outside any store, autocommitted; ``?`` placeholders."""
    connect: Callable[[], Any]
    """A raw DB-API connection of the backend's driver, in manual-commit mode."""
    footprint: Callable[[], int | None]
    """Bytes the location occupies on disk (after a checkpoint), None where not meaningful."""
    opened: list[Store] = field(default_factory=list)
    """Stores to close at teardown."""

    def open(self, **options: Any) -> Store:
        """A new store on this location; closed when the test ends."""
        store = self.opener(**options)
        self.opened.append(store)
        return store

    async def close(self, store: Store) -> None:
        """Close one store now (e.g. before reopening the location)."""
        self.opened.remove(store)
        await store.close()

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """``raw`` with positional parameters."""
        return self.raw(statement, params)


@contextlib.asynccontextmanager
async def sqlite_backend(tmp: Path) -> AsyncIterator[Backend]:
    """A SQLite file in ``tmp``."""
    path = tmp / "stead.db"

    def raw(statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        db = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            return db.execute(statement, tuple(params)).fetchall()
        finally:
            db.close()

    def footprint() -> int:
        raw("PRAGMA wal_checkpoint(TRUNCATE)", ())
        return path.stat().st_size

    def opener(poll_interval: float | None = None, **options: Any) -> Store:
        store = SQLiteStore(path, **options)
        if poll_interval is not None:
            store.poll_interval = poll_interval
        return store

    backend = Backend(
        name="sqlite",
        url=f"sqlite:///{path}",
        opener=opener,
        raw=raw,
        connect=lambda: sqlite3.connect(path, isolation_level=None, check_same_thread=False),
        footprint=footprint,
    )
    try:
        yield backend
    finally:
        for store in reversed(backend.opened):
            await store.close()


@contextlib.asynccontextmanager
async def postgres_backend(url: str) -> AsyncIterator[Backend]:
    """A fresh schema on a PostgreSQL server (``url`` names it in its search_path)."""
    import psycopg

    from stead.store.postgres import PostgresStore

    def raw(statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        query = statement.replace("%", "%%").replace("?", "%s")
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(query.encode(), tuple(params))
            return cur.fetchall() if cur.description else []

    backend = Backend(
        name="postgres",
        url=url,
        opener=lambda **options: PostgresStore(url, **options),
        raw=raw,
        connect=lambda: psycopg.connect(url),
        footprint=lambda: None,
    )
    try:
        yield backend
    finally:
        for store in reversed(backend.opened):
            await store.close()


BACKENDS: dict[str, Callable[[Any], contextlib.AbstractAsyncContextManager[Backend]]] = {
    "sqlite": sqlite_backend,
    "postgres": postgres_backend,
}
"""name -> factory of a fresh location: SQLite's takes a directory, PostgreSQL's a URL."""
