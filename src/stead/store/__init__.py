"""Stores: where runs live. ``open_store(url)`` picks the backend from the URL."""

from __future__ import annotations

from pathlib import Path

from stead.errors import UserError
from stead.store._base import Loaded, RunRecord, Store, StoredEvent
from stead.store.sqlite import SQLiteStore


def open_store(url: str | Path) -> Store:
    """Open the store a URL names.

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or a bare file path.
    """
    text = str(url)
    if text.startswith("sqlite:///"):
        return SQLiteStore(text.removeprefix("sqlite:///"))
    if text.startswith("sqlite:"):
        raise UserError(f"bad SQLite URL {text!r}; write sqlite:///path/to/file.db")
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise UserError(
            f"unsupported store {scheme!r}; use sqlite:///path.db (PostgreSQL arrives with "
            "stead[postgres])"
        )
    return SQLiteStore(text)


__all__ = ["Loaded", "RunRecord", "SQLiteStore", "Store", "StoredEvent", "open_store"]
