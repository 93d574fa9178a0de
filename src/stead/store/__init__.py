"""Stores: where runs live. ``open_store(url)`` picks the backend from the URL."""

from __future__ import annotations

from pathlib import Path

from stead.errors import UserError
from stead.store._base import CLAIMABLE, Claim, Loaded, RunRecord, Store, StoredEvent
from stead.store.sqlite import SQLiteStore


def open_store(url: str | Path) -> Store:
    """Open the store a URL names.

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or a bare file path;
    ``postgresql://user@host:port/db`` (or ``postgres://``) with ``stead[postgres]``.
    """
    text = str(url)
    if text.startswith("sqlite:///"):
        return SQLiteStore(text.removeprefix("sqlite:///"))
    if text.startswith("sqlite:"):
        raise UserError(f"bad SQLite URL {text!r}; write sqlite:///path/to/file.db")
    if text.startswith(("postgresql://", "postgres://")):
        try:
            from stead.store.postgres import PostgresStore
        except ImportError as exc:
            raise UserError(
                f"a PostgreSQL store needs psycopg: pip install 'stead[postgres]' ({exc})"
            ) from exc
        return PostgresStore(text)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise UserError(
            f"unsupported store {scheme!r}; use sqlite:///path.db or postgresql://host/db"
        )
    return SQLiteStore(text)


__all__ = [
    "CLAIMABLE",
    "Claim",
    "Loaded",
    "RunRecord",
    "SQLiteStore",
    "Store",
    "StoredEvent",
    "open_store",
]
