"""The embedded default store: one SQLite file, WAL, ``synchronous=FULL``.

Several processes may open the same file. Every write of several statements runs in ``BEGIN
IMMEDIATE``, which takes SQLite's single write lock up front, so the epoch and sequence checks
and the insert they guard are one atomic step across processes; a write of one statement (a
renewal, a release) takes the same lock when it starts and commits alone. Each commit is fsynced
(``synchronous=FULL``), so an event that ``append`` returned for survives a power cut, not just
a process crash.

Statements run on the event loop's thread: for a run alone a commit costs one fsync (~0.3 ms
here), cheaper than handing it to a thread. Many runs in flight are another matter: their
appends are written in batches (``stead.store.sql._group``), on the loop, and a batch that must
be durable is committed there too while the disk is fast, else on the store's writer thread
(``stead.store.sqlite._writer``, ``Pace`` says which and why), on a second connection of its
own, so a slow fsync does not stop every other run's work. Reads
keep the first connection and never wait for that commit; writes of this process take the
store's write lock (``_writes``), which the batch holds until its commit returned; SQLite's
write lock keeps other processes out as before.

This file is SQLite's half of ``stead.store.sql._store.SQLStore``: the connection, the transaction
(``_Tx``), error translation, polling, and the statements whose SQLite shape is its own
(an append's, alone and in a batch, in ``stead.store.sqlite._put``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from stead.errors import RunNotFound, StoreError, UserError
from stead.store import sql as _sql
from stead.store.sql import GroupCommit, known_key
from stead.store.sqlite._ledger import SQLiteLedger
from stead.store.sqlite._link import Link
from stead.store.sqlite._put import NewRun, put, put_batch, put_run, refusal
from stead.store.sqlite._writer import Commit, Pace, Writer

_LAST_SEQS = "SELECT run_id, last_seq FROM runs WHERE run_id IN (SELECT value FROM json_each(?))"
_UNIQUE = frozenset({"SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_CONSTRAINT_UNIQUE"})


class _Tx:
    """One transaction of a ``SQLiteStore``, under the thread lock of its connection (a write
    on the write connection, under the store's write lock); a write holds SQLite's write lock
    from the start (``BEGIN IMMEDIATE``). ``with`` gives the connection's cursor (the append,
    the hot path; a write that begins only); ``async with`` gives the ``Session`` the shared
    code runs on. A plain class, not a generator context manager: every append goes through
    it (a few µs less each). ``begin=False``: a write of one statement, which SQLite commits
    on its own (its write lock is taken when the statement starts, as ``BEGIN IMMEDIATE``
    would); a read never begins one (see ``SQLiteStore._reading``)."""

    __slots__ = ("_begin", "_fsync", "_link", "_store", "_write")

    def __init__(self, store: SQLiteStore, write: bool, fsync: bool, begin: bool = True) -> None:
        self._store = store
        self._link = store._reads
        self._write = write
        self._fsync = fsync
        self._begin = write and begin

    def __enter__(self) -> sqlite3.Cursor:
        # The connection is looked up here, not when the object was made: the store's write
        # connection moves to the writer thread's once that starts, and the store keeps one
        # ``_Tx`` of each kind of append (``SQLiteStore._durable``), entered one at a time
        # (a ``with`` block holds the connection's lock and never awaits).
        store = self._store
        self._link = link = store._writes if self._write else store._reads
        link.lock.acquire()
        cur = link.cur
        if not self._write:
            return cur  # each statement its own read
        try:
            if self._fsync is not link.full:
                link.sync(self._fsync)
            if self._begin:
                cur.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            link.lock.release()
            raise StoreError(f"cannot start a transaction on {self._store.path!r}: {exc}") from exc
        except BaseException:
            link.lock.release()
            raise
        return cur

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        link = self._link
        cur = link.cur
        try:
            if kind is not None:
                if link.db.in_transaction:
                    cur.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError) and exc.sqlite_errorname in _UNIQUE:
                    raise _sql.Duplicate(str(exc)) from exc
                if isinstance(exc, sqlite3.Error):
                    what = "write" if self._write else "read"
                    raise StoreError(f"{what} failed on {self._store.path!r}: {exc}") from exc
                return  # the exception propagates as it is
            if not self._begin:
                return
            try:
                cur.execute("COMMIT")
            except sqlite3.Error as err:
                if link.db.in_transaction:
                    cur.execute("ROLLBACK")
                raise StoreError(f"commit failed on {self._store.path!r}: {err}") from err
        finally:
            link.lock.release()

    async def __aenter__(self) -> _Tx:
        if self._write and self._store._writer is not None:
            await self._store._writer_idle()
        self.__enter__()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        self.__exit__(kind, exc, tb)

    @property
    def db(self) -> sqlite3.Connection:
        """The connection (a statement on it gets a cursor of its own)."""
        return self._link.db

    async def all(self, query: str, params: Sequence[Any] = ()) -> list[_sql.Row]:
        return self._link.db.execute(query, params).fetchall()

    async def one(self, query: str, params: Sequence[Any] = ()) -> _sql.Row | None:
        row: _sql.Row | None = self._link.db.execute(query, params).fetchone()
        return row

    async def run(self, query: str, params: Sequence[Any] = ()) -> int:
        return self._link.db.execute(query, params).rowcount


class _Batch(_Tx):
    """The transaction of a batch that must be durable: written here, on the loop, and
    committed on the writer thread (``Writer.commit``), which releases the store's write lock
    once the commit returned. ``await tx.committed()`` after the ``with`` block."""

    __slots__ = ("commit",)

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store, True, True)
        self.commit: Commit | None = None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        if kind is not None:
            super().__exit__(kind, exc, _)  # rolled back, locks released, the error translated
            return
        writer = self._store._writer
        assert writer is not None and writer.db is self._link.db  # made before this transaction
        self.commit = writer.commit(self._link.lock.release)  # the write lock is the thread's now


class _OnLoop(_Tx):
    """The transaction of a durable batch committed here, on the loop (``Pace.on_loop``):
    its ``COMMIT`` timed for ``Pace.took``."""

    __slots__ = ()

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store, True, True)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        if kind is not None:
            super().__exit__(kind, exc, _)
            return
        start = time.perf_counter()
        try:
            super().__exit__(None, None, None)
        finally:
            self._store.pace.took(time.perf_counter() - start)


class SQLiteStore(_sql.SQLStore):
    """``Store`` on a SQLite file."""

    dialect = "sqlite"
    DATA = "CAST(e.data AS BLOB)"
    STATE = "CAST(s.state AS BLOB)"
    SYNCED_CLAIMS = False
    """A claim is durable with the first event under its epoch (see ``_writing``)."""

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
        self.where = repr(self.path)
        """The store as messages name it."""
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
        self._busy = busy_timeout
        """Seconds a statement waits for another process's write lock before it fails (see
        ``bound_waits``)."""
        self._connect: Callable[[], sqlite3.Connection] = lambda: _connect(target, uri, self._busy)
        """Opens a connection configured as the store's (the writer thread's opens with it)."""
        try:
            self._db = self._connect()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {self.path!r}: {exc}") from exc
        self._lock = threading.Lock()
        """Guards ``_db``."""
        self._reads = Link(self._db, self._lock)
        self._writes = self._reads
        """The connection writes run on and this process's write lock, which every write
        transaction holds (a batch's until its commit on the writer thread returned):
        ``_db`` and its lock until the writer thread has a connection of its own."""
        self._writer: Writer | None = None
        self.pace = Pace()
        """Where a durable batch commits, the loop or the writer thread (see ``Pace``)."""
        self._created: str | None = None
        """The run ``_create`` wrote at once last (see there)."""
        self._tracer: Callable[[], Callable[[str], None]] | None = None
        self._durable = _Tx(self, True, True)
        """The transaction of a durable append (``with`` only: see ``_Tx.__enter__``)."""
        self._unsynced = _Tx(self, True, False)
        """The transaction of an unsynced append (the same)."""
        with _Tx(self, True, True) as db:
            self._apply_migrations(db.execute)

    # -- the dialect's half of SQLStore ------------------------------------------------------

    def _reading(self) -> _Tx:
        """The connection and its lock, no ``BEGIN``: each read statement is its own
        transaction, as on PostgreSQL, which the shared reads are written for (one statement,
        or a tail bounded by the ``last_seq`` read before it; events never change). A
        ``BEGIN`` ... ``COMMIT`` around them cost two statements more per read."""
        return _Tx(self, False, True)

    def _writing(self, *, sync: bool = True) -> _Tx:
        """One write transaction holding SQLite's write lock from the start.

        ``sync=False`` commits without syncing the WAL (``synchronous=NORMAL``): for lease
        bookkeeping only. It is visible to every process at once, and durable by the next
        event commit, which syncs the WAL and with it every frame before it; an event written
        under a new epoch therefore implies the claim that made the epoch is on disk too.
        """
        return _Tx(self, True, sync)

    def _writing_one(self, *, sync: bool = True) -> _Tx:
        """See ``SQLStore._writing_one``: no ``BEGIN IMMEDIATE`` ... ``COMMIT`` around the one
        statement (SQLite commits it alone, as atomically), two statements fewer."""
        return _Tx(self, True, sync, begin=False)

    async def _create(self, row: _sql.Row) -> None:
        """Insert the run and its first event: at once, or, when other runs are appending
        or being created (``_created`` is a run that has not appended yet: a burst of
        starts), as a member of their batch (``NewRun``), one fsync for all of them."""
        group = self.group
        if group.task is not None or group.crowd > 0 or self._created not in (None, group.last):
            await group.submit(row[0], NewRun(row))
            return
        self._created = row[0]
        if self._writer is not None:
            await self._writer_idle()
        with _Tx(self, True, True) as db:
            put_run(db, row)

    async def _write_alone(self, item: Any) -> None:
        """``GroupCommit``'s writer of one member on its own: a new run or an append."""
        if isinstance(item, NewRun):
            await self._writer_idle()
            with _Tx(self, True, True) as db:
                put_run(db, item)
        else:
            await self._append_alone(item)

    async def _append(self, a: _sql.Append) -> None:
        self._write(a)

    async def _append_alone(self, a: _sql.Append) -> None:
        """``SQLStore._append_alone`` with the write called, not awaited (it never waits
        here): one coroutine an append instead of two, on every step."""
        try:
            self._write(a)
        except _sql.Duplicate as exc:
            raise _sql.result_recorded(a[0], exc) from exc

    def _write(self, a: _sql.Append) -> None:
        """One append in its own transaction, or its refusal raised."""
        run_id, events, _, _, _, _, _, _, sync = a
        with self._durable if sync else self._unsynced as db:
            if not put(db, a):
                raise refusal(db, a)  # read in the same transaction, as a batch member's
            self.before_commit(run_id, events)  # rows written, COMMIT not run

    async def _append_many(self, batch: Sequence[Any]) -> list[BaseException | None]:
        """See ``SQLStore._append_many``: ``_start_many``, then its commit awaited."""
        commit = self._start_many(batch)
        assert commit is not None  # not eager: never declined
        try:
            await commit.wait()
        except sqlite3.Error as err:
            raise StoreError(f"commit failed on {self.path!r}: {err}") from err
        return commit.outcomes

    def _start_many(self, batch: Sequence[Any], eager: bool = False) -> Commit | None:
        """A batch's statements, here and now, and its commit: one ``BEGIN IMMEDIATE`` ...
        ``COMMIT``, so one fsync for the batch (none when no member asks for one). A batch
        that fsyncs commits here while the disk is fast, else on the writer thread (``Pace``
        says which and why); one that does not commits here, as it costs no wait for the
        disk. Members may be new runs too (``NewRun``, from ``_create``), which always fsync.
        ``eager`` (``GroupCommit`` starting a batch from an append, the thread being free):
        None, and nothing done, when the batch would commit here (the task does that, once a
        turn of the loop) or while another write waits for the thread to be idle, so that it
        gets its turn."""
        tx: _Tx
        if any(isinstance(a, NewRun) or a[8] for a in batch):
            writer = self._writer
            # Eager: not on the loop (one commit a turn of it, by the task, not one an append)
            # nor while a write waits for the thread (it gets its turn).
            if eager and (self.pace.next_on_loop or writer is None or writer.idle_waiters):
                return None
            if self.pace.on_loop():
                tx = _OnLoop(self)
            else:
                if writer is None:
                    self._start_writer()
                tx = _Batch(self)
        else:
            tx = _Tx(self, True, False)
        with tx as db:
            written = put_batch(db, batch)
            out: list[BaseException | None] = (
                [None] * len(batch)  # every guard held: the usual case, no loop
                if all(written)
                else [None if ok else refusal(db, a) for a, ok in zip(batch, written, strict=True)]
            )
            if not _sql.unarmed(self.before_commit):  # else it does nothing for any member
                for a, refused in zip(batch, out, strict=True):
                    if refused is None and not isinstance(a, NewRun):
                        self.before_commit(a[0], a[1])  # rows written, COMMIT not run
        if isinstance(tx, _Batch) and tx.commit is not None:
            tx.commit.outcomes = out
            return tx.commit
        return Commit.now(out)

    @functools.cached_property
    def group(self) -> GroupCommit:
        """See ``SQLStore.group``. On SQLite a queued append alone in its batch is written
        as a batch too, when other runs appended lately (``GroupCommit.lone_in_many``): its
        fsync then waits on the writer thread instead of on the loop."""
        return GroupCommit(
            self._write_alone, self._append_many, lone_in_many=True, start=self._start_many
        )

    def bound_waits(self, seconds: float) -> None:
        """See ``Store.bound_waits``: the busy timeout of every connection, now and to come.

        It matters more here than anywhere: statements run on the event loop's thread, so a
        write waiting for another process's lock (a long transaction, a paused process that
        holds it) stops every timer of the loop, the lease deadline's too, for that long."""
        if seconds <= 0 or seconds >= self._busy:
            return
        self._busy = seconds
        for link in {id(c): c for c in (self._reads, self._writes)}.values():
            with link.lock:
                link.db.execute(f"PRAGMA busy_timeout={int(seconds * 1000)}")

    def _start_writer(self) -> None:
        # Called on the loop with no transaction open (the caller is about to begin one).
        try:
            db = self._connect()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open a writer on {self.path!r}: {exc}") from exc
        if self._tracer is not None:
            db.set_trace_callback(self._tracer())
        self._writer = Writer(db)
        self._writes = Link(db, threading.Lock())

    async def _writer_idle(self) -> None:
        """Wait (without blocking the loop) for a batch's commit under way on the writer
        thread: a write would otherwise block on the write lock until it returned."""
        writer = self._writer
        busy = None if writer is None else writer.busy
        if busy is not None and not busy.done() and busy.get_loop() is asyncio.get_running_loop():
            assert writer is not None
            writer.idle_waiters += 1  # no batch starts from an append meanwhile (see there)
            try:
                # Not awaited itself: its outcome is its batch's, and a cancelled batch must
                # not cancel this caller (``asyncio.wait`` neither raises nor cancels it).
                await asyncio.wait((busy,))
            finally:
                writer.idle_waiters -= 1

    async def _claimed(self, s: _sql.Session, params: Sequence[Any]) -> int | None:
        # Inside BEGIN IMMEDIATE: nobody writes the row between the update and the read (an
        # UPDATE ... RETURNING costs SQLite more than the read: it is a temporary trigger).
        if await s.run(self.CLAIM, params) != 1:
            return None
        row = await s.one("SELECT epoch FROM runs WHERE run_id = ?", (params[2],))
        return None if row is None else int(row[0])

    async def _claim_rows(
        self,
        *,
        owner: str,
        now: float,
        ttl: float,
        limit: int,
        agents: Sequence[str] | None,
        fingerprints: Sequence[str] | None = None,
    ) -> list[_sql.Row]:
        by_agent = "" if agents is None else f" AND agent IN ({', '.join('?' * len(agents))})"
        if fingerprints is not None:  # a run pinned to another agent version is not ours
            marks = ", ".join("?" * len(fingerprints)) or "NULL"
            by_agent += (
                " AND NOT EXISTS (SELECT 1 FROM run_pins p WHERE p.run_id = runs.run_id "
                f"AND p.fingerprint NOT IN ({marks}))"
            )
        half = (*(agents or ()), *(fingerprints or ()))
        await self._writer_idle()
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
                (*half, now, *half, limit),
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

    async def last_seqs(self, run_ids: Sequence[str]) -> dict[str, int]:
        """See ``Store.last_seqs``: one statement (the ids as one JSON array), not one a run:
        a worker holding 1,000 runs asks this every watch interval."""
        if not run_ids:
            return {}
        with self._lock:
            try:
                rows = self._db.execute(_LAST_SEQS, (json.dumps(list(run_ids)),)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"read failed on {self.path!r}: {exc}") from exc
        return dict(rows)

    async def renew_leases(
        self, leases: Sequence[tuple[str, int]], *, owner: str, now: float, ttl: float
    ) -> list[str]:
        """See ``Store.renew_leases``: one ``executemany`` for a worker's every lease (a
        worker holding 1,000 runs made 1,000 calls each round), in one unsynced transaction.
        It tells only how many renewals held; when one did not (a lease lost, rare), each is
        run again, as before, to name the runs whose renewal changes nothing."""
        params = [(now + ttl, run_id, epoch, owner) for run_id, epoch in leases]
        async with self._writing(sync=False) as s:
            db = s.db
            if db.executemany(self.RENEW, params).rowcount == len(params):
                return []
            return [p[1] for p in params if db.execute(self.RENEW, p).rowcount != 1]

    async def wait_claimable(self, timeout: float) -> None:  # noqa: ASYNC109
        """See ``Store.wait_claimable``: no notices cross processes on SQLite, so a worker
        polls ``claim_next`` at its pace."""
        await asyncio.sleep(max(0.0, timeout))

    def open_ledger(self, *, poll_interval: float | None = None) -> SQLiteLedger:
        """This store's execution ledger (``stead.store.ledger``) with its SQLite half,
        polled every 0.05 s unless told: SQLite has no notices, so both sides poll."""
        return SQLiteLedger(self, poll_interval=poll_interval or 0.05)

    async def close(self) -> None:
        """See ``Store.close``: the writer thread, if one started, is stopped and joined."""
        if self._writer is not None:
            await self._writer_idle()
            with self._writes.lock:
                self._writer.close()
            self._writer, self._writes = None, self._reads
        with self._lock:
            self._db.close()

    def _trace(self, make: Callable[[], Callable[[str], None]]) -> None:
        """Trace every statement of this store's connections, for tests and benchmarks
        (``stead.testing.SQLiteCommits``): ``make()`` gives one connection's hook (made for
        each, now and when the writer's opens: a transaction's state is its connection's).
        A hook on the writer's connection is called on the writer thread."""
        self._tracer = make
        for link in {id(c): c for c in (self._reads, self._writes)}.values():
            link.db.set_trace_callback(make())
            if not link.full:  # a hook starts from FULL, as a connection does: say so
                with link.lock:
                    link.cur.execute("PRAGMA synchronous=NORMAL")

    # -- introspection for tests and benchmarks ---------------------------------------------

    def payload_bytes(self, run_id: str) -> int:
        """Bytes of event data plus snapshot state stored for one run."""
        with self._lock:
            db = self._db
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


def _connect(target: str, uri: bool, busy_timeout: float) -> sqlite3.Connection:
    """A connection to the store's file, configured as every connection of the store is."""
    db = sqlite3.connect(
        target, isolation_level=None, check_same_thread=False, timeout=busy_timeout, uri=uri
    )
    db.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
    _retry_busy(lambda: db.execute("PRAGMA journal_mode=WAL"), busy_timeout)
    db.execute("PRAGMA synchronous=FULL")
    return db


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
