"""The embedded default store: one SQLite file (``SQLiteStore``), and its half of the
execution ledger. Imports no other dialect."""

from stead.store.sqlite._store import SQLiteStore

__all__ = ["SQLiteStore"]
