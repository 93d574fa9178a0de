"""Count what a SQLite store committed, and how much of it waited for the disk.

A test that shows a store fsyncs less (group commit, the ``effects`` durability mode) must
count, never time: the clock of a shared machine says nothing about a few fsyncs. This traces
every statement of the store's connections (``sqlite3.Connection.set_trace_callback``,
SQLite's own seam, through ``SQLiteStore._trace``: the writer thread's connection too): a
write transaction (``BEGIN IMMEDIATE``) that reaches ``COMMIT`` is a commit, and so is a write
outside any transaction (a renewal or a release: one statement, which SQLite commits alone); it
fsyncs the WAL unless the store set ``PRAGMA synchronous=NORMAL`` for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class SQLiteCommits:
    """``SQLiteCommits(store)`` counts, from now on, the write transactions a
    ``SQLiteStore`` commits (``commits``) and those of them that fsynced (``fsyncs``)."""

    def __init__(self, store: Any) -> None:
        self.commits = 0
        self.fsyncs = 0
        self._lock = threading.Lock()  # the writer thread's connection counts on that thread
        store._trace(self._hook)

    def _hook(self) -> Callable[[str], None]:
        """One connection's trace hook: its transaction state is its own."""
        synced, writing, inside = True, False, False

        def seen(statement: str) -> None:
            nonlocal synced, writing, inside
            s = statement.upper()
            if s.startswith("PRAGMA SYNCHRONOUS="):
                synced = s.endswith("FULL")
            elif s.startswith("BEGIN"):
                writing = "IMMEDIATE" in s  # a read's BEGIN ... COMMIT syncs nothing
                inside = True
            elif s.startswith(("COMMIT", "ROLLBACK")):
                if writing and s.startswith("COMMIT"):
                    self._count(synced)
                writing = inside = False
            elif not inside and s.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE")):
                self._count(synced)  # autocommitted: its own transaction

        return seen

    def _count(self, synced: bool) -> None:
        with self._lock:
            self.commits += 1
            self.fsyncs += synced
