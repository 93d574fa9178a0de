"""Count what a SQLite store committed, and how much of it waited for the disk.

A test that shows a store fsyncs less (group commit, the ``effects`` durability mode) must
count, never time: the clock of a shared machine says nothing about a few fsyncs. This traces
every statement of the store's one connection (``sqlite3.Connection.set_trace_callback``,
SQLite's own seam): a write transaction (``BEGIN IMMEDIATE``) that reaches ``COMMIT`` is a
commit, and it fsyncs the WAL unless the store set ``PRAGMA synchronous=NORMAL`` for it.
"""

from __future__ import annotations

from typing import Any


class SQLiteCommits:
    """``SQLiteCommits(store)`` counts, from now on, the write transactions a
    ``SQLiteStore`` commits (``commits``) and those of them that fsynced (``fsyncs``)."""

    def __init__(self, store: Any) -> None:
        self.commits = 0
        self.fsyncs = 0
        self._synced = True
        self._writing = False
        store._db.set_trace_callback(self)

    def __call__(self, statement: str) -> None:
        s = statement.upper()
        if s.startswith("PRAGMA SYNCHRONOUS="):
            self._synced = s.endswith("FULL")
        elif s.startswith("BEGIN"):
            self._writing = "IMMEDIATE" in s  # a read's BEGIN ... COMMIT syncs nothing
        elif s.startswith("COMMIT") and self._writing:
            self.commits += 1
            self.fsyncs += self._synced
