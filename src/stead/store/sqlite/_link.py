"""A connection of ``SQLiteStore`` with what its transactions keep beside it: its thread lock,
its one cursor and its ``PRAGMA synchronous`` mode (``stead.store.sqlite._store._Tx`` uses
them)."""

from __future__ import annotations

import sqlite3
import threading


class Link:
    """One connection of a ``SQLiteStore``, the thread lock that guards it, and the one cursor
    its write transactions run on: ``Connection.execute`` makes a cursor for every statement
    (about 1.5k instructions each, five statements an append). Only statements that finish
    when they run (``BEGIN``, ``COMMIT``, ``ROLLBACK``, inserts, updates, a ``SELECT`` read to
    its end) go through ``cur``: a ``SELECT`` left half-read on a kept cursor would hold the
    connection's read snapshot open after its transaction. A read's statements take cursors of
    their own (``db.execute``), dropped with their rows.

    ``full`` is the connection's ``PRAGMA synchronous`` (FULL, as opened, or NORMAL), which a
    write transaction sets only when it wants the other: a run's steps fsync, one after
    another, and only its claim, its release and an unsynced append between them do not, so
    a toggle around each of those (two statements each) became one statement where the mode
    changes. The mode is read at each commit, and every write of the store's goes through
    ``_Tx``, which sets it first."""

    __slots__ = ("cur", "db", "full", "lock")

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self.db = db
        self.lock = lock
        self.cur = db.cursor()
        self.full = True  # as ``_connect`` left it

    def sync(self, full: bool) -> None:
        """``PRAGMA synchronous`` FULL or NORMAL for the commits to come, if not so already
        (the caller holds ``lock``, outside any transaction)."""
        if full is not self.full:
            self.cur.execute("PRAGMA synchronous=FULL" if full else "PRAGMA synchronous=NORMAL")
            self.full = full
