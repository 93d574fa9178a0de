"""The embedded default store: one SQLite file, WAL, ``synchronous=FULL``.

Several processes may open the same file. Every write runs in ``BEGIN IMMEDIATE``, which takes
SQLite's single write lock up front, so the epoch and sequence checks and the insert they
guard are one atomic step across processes. Each commit is fsynced (``synchronous=FULL``), so
an event that ``append`` returned for survives a power cut, not just a process crash.

Statements run on the caller's thread: a commit costs one fsync (~0.3 ms here), cheaper than
handing it to a thread, and SQLite serialises writers anyway.

This file is SQLite's half of ``stead.store._sql.SQLStore``: the connection, the transaction
(``_Tx``), error translation, polling, and the statements whose SQLite shape is its own.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from stead.errors import RunNotFound, StoreError, UserError
from stead.store import _sql
from stead.store._base import known_key

_GUARD = (
    "UPDATE runs SET last_seq = ?, status = ?, updated_at = ? "
    "WHERE run_id = ? AND epoch = ? AND last_seq = ?"
)
_INSERT_EVENT = (
    "INSERT INTO events (run_no, run_id, seq, kind, version, turn_index, tool_call_id, data, "
    "created_at) VALUES ((SELECT run_no FROM runs WHERE run_id = ?1), ?1, ?2, ?3, ?4, ?5, ?6, "
    "?7, ?8)"
)
"""An event row; its run's number (migration 0008: what the events are indexed by) is read
from the runs row, which the append's guard has just written, so its page is at hand."""
_UNIQUE = frozenset({"SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"})


class _Tx:
    """One transaction of a ``SQLiteStore``, under its thread lock; a write holds SQLite's
    write lock from the start (``BEGIN IMMEDIATE``). ``with`` gives the connection (the
    append, the hot path); ``async with`` gives the ``Session`` the shared code runs on. A
    plain class, not a generator context manager: every append goes through it (a few µs
    less each)."""

    __slots__ = ("_db", "_fsync", "_store", "_write")

    def __init__(self, store: SQLiteStore, write: bool, fsync: bool) -> None:
        self._store = store
        self._db = store._db
        self._write = write
        self._fsync = fsync

    def __enter__(self) -> sqlite3.Connection:
        self._store._lock.acquire()
        db = self._db
        try:
            if not self._fsync:
                db.execute("PRAGMA synchronous=NORMAL")
            db.execute("BEGIN IMMEDIATE" if self._write else "BEGIN")
        except sqlite3.Error as exc:
            self._release()
            raise StoreError(f"cannot start a transaction on {self._store.path!r}: {exc}") from exc
        except BaseException:
            self._release()
            raise
        return db

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        db = self._db
        try:
            if kind is not None:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError) and exc.sqlite_errorname in _UNIQUE:
                    raise _sql.Duplicate(str(exc)) from exc
                if isinstance(exc, sqlite3.Error):
                    what = "write" if self._write else "read"
                    raise StoreError(f"{what} failed on {self._store.path!r}: {exc}") from exc
                return  # the exception propagates as it is
            try:
                db.execute("COMMIT")
            except sqlite3.Error as err:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise StoreError(f"commit failed on {self._store.path!r}: {err}") from err
        finally:  # _release, written out: every append passes here
            try:
                if not self._fsync:
                    db.execute("PRAGMA synchronous=FULL")
            finally:
                self._store._lock.release()

    def _release(self) -> None:
        try:
            if not self._fsync:
                self._db.execute("PRAGMA synchronous=FULL")
        finally:
            self._store._lock.release()

    async def __aenter__(self) -> _Tx:
        self.__enter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        self.__exit__(kind, exc, tb)

    async def all(self, query: str, params: Sequence[Any] = ()) -> list[_sql.Row]:
        return self._db.execute(query, params).fetchall()

    async def one(self, query: str, params: Sequence[Any] = ()) -> _sql.Row | None:
        row: _sql.Row | None = self._db.execute(query, params).fetchone()
        return row

    async def run(self, query: str, params: Sequence[Any] = ()) -> int:
        return self._db.execute(query, params).rowcount


class SQLiteStore(_sql.SQLStore):
    """``Store`` on a SQLite file."""

    dialect = "sqlite"
    DATA = "CAST(e.data AS BLOB)"
    STATE = "CAST(s.state AS BLOB)"
    SYNCED_CLAIMS = False
    """A claim is durable with the first event under its epoch (see ``_writing``)."""
    # Events are indexed by their run's number (migration 0008), not by its id.
    TAIL = (
        "SELECT e.seq, e.kind, e.version, {data}, e.created_at FROM events e "
        "WHERE e.run_no = (SELECT run_no FROM runs WHERE run_id = ?) AND e.seq > ? "
        "AND e.seq <= ? ORDER BY e.seq"
    )
    READ_EVENTS = (
        "SELECT r.last_seq, e.seq, e.kind, e.version, {data}, e.created_at FROM runs r "
        "LEFT JOIN events e ON e.run_no = r.run_no AND e.seq > ? WHERE r.run_id = ? "
        "ORDER BY e.seq"
    )
    READ_SOME = READ_EVENTS + " LIMIT ?"

    poll_interval: float = 0.05
    """How often ``wait_changed`` looks at the run's row (a cheap primary-key read)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        before_commit: _sql.BeforeCommit = _sql.crash_before_result,
        create: bool = True,
    ) -> None:
        """``create=False`` opens an existing file only (SQLite's ``mode=rw``): a reader such
        as ``stead runs list`` pointed at a mistyped path gets an error naming the file, not
        an empty store it just created."""
        self.path = os.fspath(path)
        if self.path in ("", ":memory:"):  # both are a database no other connection sees
            raise UserError(
                f"stead needs a file (several processes share it), not {self.path!r}; "
                "name one, e.g. SQLiteStore('runs.db')"
            )
        self.before_commit = before_commit
        if not create and not os.path.isfile(self.path):
            raise UserError(
                f"no SQLite store at {self.path!r} (the file does not exist); check --store "
                "or $STEAD_STORE"
            )
        target, uri = self.path, False
        if not create:  # the check above and the open are not atomic: mode=rw never creates
            target, uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=rw", True
        try:
            self._db = sqlite3.connect(
                target,
                isolation_level=None,
                check_same_thread=False,
                timeout=busy_timeout,
                uri=uri,
            )
            self._db.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
            _retry_busy(lambda: self._db.execute("PRAGMA journal_mode=WAL"), busy_timeout)
            self._db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {self.path!r}: {exc}") from exc
        self._lock = threading.Lock()
        with _Tx(self, True, True) as db:
            self._apply_migrations(db.execute)

    # -- the dialect's half of SQLStore ------------------------------------------------------

    def _reading(self) -> _Tx:
        return _Tx(self, False, True)

    def _writing(self, *, sync: bool = True) -> _Tx:
        """One write transaction holding SQLite's write lock from the start.

        ``sync=False`` commits without syncing the WAL (``synchronous=NORMAL``): for lease
        bookkeeping only. It is visible to every process at once, and durable by the next
        event commit, which syncs the WAL and with it every frame before it; an event written
        under a new epoch therefore implies the claim that made the epoch is on disk too.
        """
        return _Tx(self, True, sync)

    async def _create(self, row: _sql.Row) -> None:
        run_id, agent, session_id, correlation_id, now, kind, version, turn, call, data = row
        with _Tx(self, True, True) as db:
            db.execute(
                "INSERT INTO runs (run_id, agent, session_id, correlation_id, status, "
                "last_seq, epoch, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, 'queued', 1, 0, ?, ?)",
                (run_id, agent, session_id, correlation_id, now, now),
            )
            db.execute(_INSERT_EVENT, (run_id, 1, kind, version, turn, call, data, now))

    async def _append(self, a: _sql.Append) -> None:
        run_id, events, _, expected, epoch, _, _, _, sync = a
        tx = _Tx(self, True, sync)
        with tx as db:
            if not _put(db, a):
                raise await self.refusal(tx, run_id, epoch, expected)
            self.before_commit(run_id, events)  # rows written, COMMIT not run

    async def _append_many(self, batch: Sequence[_sql.Append]) -> list[BaseException | None]:
        """See ``SQLStore._append_many``: one ``BEGIN IMMEDIATE`` ... ``COMMIT``, so one
        fsync for the batch (none when no member asks for one)."""
        out: list[BaseException | None] = []
        tx = _Tx(self, True, any(a[8] for a in batch))
        with tx as db:
            for a in batch:
                out.append(None if _put(db, a) else await self.refusal(tx, a[0], a[4], a[3]))
            for a, refused in zip(batch, out, strict=True):
                if refused is None:
                    self.before_commit(a[0], a[1])  # rows written, COMMIT not run
        return out

    async def _claimed(self, s: _sql.Session, params: Sequence[Any]) -> int | None:
        # Inside BEGIN IMMEDIATE: nobody writes the row between the update and the read.
        if await s.run(self.CLAIM, params) != 1:
            return None
        row = await s.one("SELECT epoch FROM runs WHERE run_id = ?", (params[2],))
        return None if row is None else int(row[0])

    async def _claim_rows(
        self, *, owner: str, now: float, ttl: float, limit: int, agents: Sequence[str] | None
    ) -> list[_sql.Row]:
        by_agent = "" if agents is None else f" AND agent IN ({', '.join('?' * len(agents))})"
        # BEGIN IMMEDIATE holds SQLite's one write lock from the select to the updates: no
        # other process can claim (or append to) these rows in between. No fsync, as for
        # ``claim``: the first event under the new epoch makes the claim durable with it.
        with _Tx(self, True, False) as db:
            # Unheld runs, then held ones whose lease lapsed: each half uses its own index
            # (migration 0002), so a claim never scans the finished runs.
            columns = "run_id, agent, status, epoch, lease_owner, updated_at"
            rows = db.execute(
                f"SELECT {columns} FROM runs WHERE lease_owner IS NULL "
                f"AND status IN ({_sql.CLAIMABLE_SQL}){by_agent} "
                f"UNION ALL SELECT {columns} FROM runs WHERE lease_owner IS NOT NULL "
                "AND (lease_expires_at IS NULL OR lease_expires_at <= ?) "
                f"AND status IN ({_sql.CLAIMABLE_SQL}){by_agent} "
                "ORDER BY updated_at LIMIT ?",
                (*(agents or ()), now, *(agents or ()), limit),
            ).fetchall()
            db.executemany(
                "UPDATE runs SET epoch = ?, lease_owner = ?, lease_expires_at = ? WHERE run_id = ?",
                [(r[3] + 1, owner, now + ttl, r[0]) for r in rows],
            )
        return [(r[0], r[1], r[2], r[3] + 1, r[4]) for r in rows]

    # -- waiting ----------------------------------------------------------------------------

    async def wait_changed(self, run_id: str, after_seq: int, timeout: float) -> int:  # noqa: ASYNC109
        """See ``Store.wait_changed``: SQLite polls the run's row every ``poll_interval``."""
        known_key(run_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            with self._lock:
                try:
                    row = self._db.execute(
                        "SELECT last_seq FROM runs WHERE run_id = ?", (run_id,)
                    ).fetchone()
                except sqlite3.Error as exc:
                    raise StoreError(f"read failed on {self.path!r}: {exc}") from exc
            if row is None:
                raise RunNotFound(run_id)
            if row[0] > after_seq or loop.time() >= deadline:
                return int(row[0])
            await asyncio.sleep(min(self.poll_interval, max(0.0, deadline - loop.time())))

    async def wait_claimable(self, timeout: float) -> None:  # noqa: ASYNC109
        """See ``Store.wait_claimable``: no notices cross processes on SQLite, so a worker
        polls ``claim_next`` at its pace."""
        await asyncio.sleep(max(0.0, timeout))

    async def close(self) -> None:
        """See ``Store.close``."""
        with self._lock:
            self._db.close()

    # -- introspection for tests and benchmarks ---------------------------------------------

    def payload_bytes(self, run_id: str) -> int:
        """Bytes of event data plus snapshot state stored for one run."""
        with _Tx(self, False, True) as db:
            ev = db.execute(
                "SELECT COALESCE(SUM(LENGTH(CAST(data AS BLOB))), 0) FROM events "
                "WHERE run_no = (SELECT run_no FROM runs WHERE run_id = ?)",
                (run_id,),
            ).fetchone()[0]
            sn = db.execute(
                "SELECT COALESCE(SUM(LENGTH(CAST(state AS BLOB))), 0) FROM snapshots "
                "WHERE run_id = ?",
                (run_id,),
            ).fetchone()[0]
        return int(ev) + int(sn)


def _put(db: sqlite3.Connection, a: _sql.Append) -> bool:
    """Write one append inside the caller's write transaction if its guard holds; False (and
    nothing written) when the run is not at the expected sequence and epoch."""
    run_id, _, rows, expected, epoch, status, now, snapshot, _ = a
    # The epoch and sequence checks and the write they guard are one statement in the
    # write transaction: a stale owner or a stale sequence changes nothing.
    guard = (expected + len(rows), status, now, run_id, epoch, expected)
    if db.execute(_GUARD, guard).rowcount != 1:
        return False
    db.executemany(
        _INSERT_EVENT,
        [
            (run_id, expected + i, kind, version, turn, call, data, now)
            for i, (kind, version, turn, call, data) in enumerate(rows, 1)
        ],
    )
    if snapshot is not None:
        db.execute(
            "INSERT INTO snapshots (run_id, seq, version, state) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, "
            "version = excluded.version, state = excluded.state",
            (run_id, *snapshot),
        )
    return True


def _retry_busy(action: Callable[[], object], timeout: float) -> None:
    """Run ``action``, retrying while SQLite reports the database busy.

    Switching a brand-new file to WAL does not honour ``busy_timeout`` when another process
    is creating the same store at that moment, so this waits by hand.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            action()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
