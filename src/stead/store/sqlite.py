"""The embedded default store: one SQLite file, WAL, ``synchronous=FULL``.

Several processes may open the same file. Every write runs in ``BEGIN IMMEDIATE``, which takes
SQLite's single write lock up front, so the epoch and sequence checks and the insert they
guard are one atomic step across processes. Each commit is fsynced (``synchronous=FULL``), so
an event that ``append`` returned for survives a power cut, not just a process crash.

Statements run on the caller's thread: a commit costs one fsync (~0.3 ms here), cheaper than
handing it to a thread, and SQLite serialises writers anyway.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any

from stead import _crash
from stead.core.events import Event, RunCreated
from stead.errors import Conflict, Fenced, LeaseHeld, RunNotFound, StoreError, UserError
from stead.store._base import (
    CLAIMABLE,
    Claim,
    Loaded,
    RunRecord,
    StoredEvent,
    append_refusal,
    created_row,
    decode_events,
    event_row,
    known_key,
    snapshot_state,
    snapshot_text,
)

_RUN_COLUMNS = (
    "run_id, agent, session_id, correlation_id, status, last_seq, epoch, lease_owner, "
    "lease_expires_at, created_at, updated_at"
)


def _record(row: sqlite3.Row | tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        agent=row[1],
        session_id=row[2],
        correlation_id=row[3],
        status=row[4],
        last_seq=row[5],
        epoch=row[6],
        lease_owner=row[7],
        lease_expires_at=row[8],
        created_at=row[9],
        updated_at=row[10],
    )


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration file for ``dialect``, in order."""
    folder = resources.files("stead.store") / "migrations" / dialect
    out = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            number, _, rest = entry.name.partition("_")
            out.append((int(number), rest.removesuffix(".sql"), entry.read_text("utf-8")))
    return sorted(out)


_GUARD = (
    "UPDATE runs SET last_seq = ?, status = ?, updated_at = ? "
    "WHERE run_id = ? AND epoch = ? AND last_seq = ?"
)
_INSERT_EVENT = (
    "INSERT INTO events (run_id, seq, kind, version, turn_index, tool_call_id, data, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


class _Write:
    """The write transaction of ``SQLiteStore._write``: a plain class, not a generator
    context manager, because every append goes through it (a few µs less each)."""

    __slots__ = ("_db", "_fsync", "_store")

    def __init__(self, store: SQLiteStore, fsync: bool) -> None:
        self._store = store
        self._db = store._db
        self._fsync = fsync

    def __enter__(self) -> sqlite3.Connection:
        self._store._lock.acquire()
        db = self._db
        try:
            if not self._fsync:
                db.execute("PRAGMA synchronous=NORMAL")
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._release()
            raise StoreError(f"cannot start a write on {self._store.path!r}: {exc}") from exc
        except BaseException:
            self._release()
            raise
        return db

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        db = self._db
        try:
            if kind is not None:
                db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"write failed on {self._store.path!r}: {exc}") from exc
                return  # the exception propagates as it is
            try:
                db.execute("COMMIT")
            except sqlite3.Error as err:
                db.execute("ROLLBACK")
                raise StoreError(f"commit failed on {self._store.path!r}: {err}") from err
        finally:
            self._release()

    def _release(self) -> None:
        try:
            if not self._fsync:
                self._db.execute("PRAGMA synchronous=FULL")
        finally:
            self._store._lock.release()


class SQLiteStore:
    """``Store`` on a SQLite file."""

    poll_interval: float = 0.05
    """How often ``wait_changed`` looks at the run's row (a cheap primary-key read)."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self.path = os.fspath(path)
        if self.path in ("", ":memory:"):  # both are a database no other connection sees
            raise UserError(
                f"stead needs a file (several processes share it), not {self.path!r}; "
                "name one, e.g. SQLiteStore('runs.db')"
            )
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout
            )
            self._db.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
            _retry_busy(lambda: self._db.execute("PRAGMA journal_mode=WAL"), busy_timeout)
            self._db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {self.path!r}: {exc}") from exc
        self._lock = threading.Lock()
        self._migrate()

    # -- plumbing ---------------------------------------------------------------------------

    def _write(self, *, fsync: bool = True) -> _Write:
        """One write transaction holding SQLite's write lock from the start.

        ``fsync=False`` commits without syncing the WAL (``synchronous=NORMAL``): for lease
        bookkeeping only. It is visible to every process at once, and durable by the next
        event commit, which syncs the WAL and with it every frame before it; an event written
        under a new epoch therefore implies the claim that made the epoch is on disk too.
        """
        return _Write(self, fsync)

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN")
                yield self._db
            except sqlite3.Error as exc:
                raise StoreError(f"read failed on {self.path!r}: {exc}") from exc
            finally:
                self._db.execute("COMMIT")

    def _migrate(self) -> None:
        with self._write() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
            )
            done = {r[0] for r in db.execute("SELECT version FROM schema_migrations")}
            for version, name, sql in migrations("sqlite"):
                if version in done:
                    continue
                for statement in _statements(sql):
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", (version, name)
                )

    def _row(self, db: sqlite3.Connection, run_id: str) -> RunRecord:
        row = db.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(run_id)
        return _record(row)

    # -- the contract -----------------------------------------------------------------------

    async def create_run(self, event: RunCreated, *, now: float) -> None:
        kind, version, turn, call, data = created_row(event)
        with self._write() as db:
            try:
                db.execute(
                    "INSERT INTO runs (run_id, agent, session_id, correlation_id, status, "
                    "last_seq, epoch, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, 'queued', 1, 0, ?, ?)",
                    (event.run_id, event.agent, event.session_id, event.correlation_id, now, now),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"run {event.run_id!r} already exists") from exc
            db.execute(
                "INSERT INTO events (run_id, seq, kind, version, turn_index, tool_call_id, "
                "data, created_at) VALUES (?, 1, ?, ?, ?, ?, ?, ?)",
                (event.run_id, kind, version, turn, call, data, now),
            )

    async def append(
        self,
        run_id: str,
        events: Sequence[Event],
        *,
        expected_seq: int,
        epoch: int,
        status: str,
        now: float,
        snapshot: tuple[int, dict[str, Any]] | None = None,
        sync: bool = True,
    ) -> int:
        if not events:
            return expected_seq
        rows = [event_row(e) for e in events]
        seq = expected_seq + len(rows)
        with self._write(fsync=sync) as db:
            # The epoch and sequence checks and the write they guard are one statement in
            # the write transaction: a stale owner or a stale sequence changes nothing.
            cur = db.execute(_GUARD, (seq, status, now, run_id, epoch, expected_seq))
            if cur.rowcount != 1:
                self._refusal(db, run_id, epoch, expected_seq)
            try:
                db.executemany(
                    _INSERT_EVENT,
                    [
                        (run_id, expected_seq + i, kind, version, turn, call, data, now)
                        for i, (kind, version, turn, call, data) in enumerate(rows, 1)
                    ],
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(
                    f"run {run_id}: a result for this tool call is already recorded ({exc})"
                ) from exc
            if snapshot is not None:
                snap_seq, state = snapshot
                db.execute(
                    "INSERT INTO snapshots (run_id, seq, version, state) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, "
                    "version = excluded.version, state = excluded.state",
                    (run_id, snap_seq, int(state.get("v", 0)), _pack(state)),
                )
            if _crash.armed() and any(k == "tool_result_recorded" for k, *_ in rows):
                _crash.point("before_result_commit", _tool_of(events))
        return seq

    def _refusal(self, db: sqlite3.Connection, run_id: str, epoch: int, expected: int) -> None:
        """Say why a guarded append changed nothing (the transaction rolls back)."""
        found = db.execute(
            "SELECT last_seq, epoch FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        raise append_refusal(run_id, found, epoch, expected)

    async def load(self, run_id: str) -> Loaded:
        known_key(run_id)
        with self._read() as db:
            record = self._row(db, run_id)
            snap = db.execute(
                "SELECT seq, CAST(state AS BLOB) FROM snapshots WHERE run_id = ?", (run_id,)
            ).fetchone()
            snapshot: dict[str, Any] | None = None
            snap_seq = 0
            if snap is not None:
                # A snapshot is a cache: anything unreadable means "fold the log instead".
                try:
                    parsed = _unpack(bytes(snap[1]))
                except (ValueError, TypeError, zlib.error):
                    parsed = None
                if parsed is not None and isinstance(snap[0], int):
                    snapshot, snap_seq = parsed, snap[0]
            tail = self._events(db, run_id, snap_seq, record.last_seq)
        return Loaded(record=record, snapshot=snapshot, snapshot_seq=snap_seq, tail=tail)

    def _events(
        self, db: sqlite3.Connection, run_id: str, after: int, last_seq: int
    ) -> list[StoredEvent]:
        rows = db.execute(
            "SELECT seq, kind, version, CAST(data AS BLOB), created_at FROM events "
            "WHERE run_id = ? AND seq > ? ORDER BY seq",
            (run_id, after),
        ).fetchall()
        return decode_events(run_id, rows, after, last_seq)

    async def read_events(self, run_id: str, after: int = 0) -> list[StoredEvent]:
        known_key(run_id)
        with self._read() as db:
            record = self._row(db, run_id)
            return self._events(db, run_id, after, record.last_seq)

    async def get_run(self, run_id: str) -> RunRecord:
        known_key(run_id)
        with self._lock:
            try:
                return self._row(self._db, run_id)
            except sqlite3.Error as exc:
                raise StoreError(f"read failed on {self.path!r}: {exc}") from exc

    async def list_runs(self, *, status: str | None = None, limit: int = 100) -> list[RunRecord]:
        with self._read() as db:
            if status is None:
                rows = db.execute(
                    f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY updated_at DESC LIMIT ?", (limit,)
                ).fetchall()
            else:
                # Two halves so each uses its index (see migration 0002): the runs nobody
                # holds by (status, updated_at), the few held ones by lease.
                rows = db.execute(
                    f"SELECT {_RUN_COLUMNS} FROM runs WHERE lease_owner IS NULL AND status = ? "
                    f"UNION ALL SELECT {_RUN_COLUMNS} FROM runs "
                    "WHERE lease_owner IS NOT NULL AND status = ? "
                    "ORDER BY updated_at DESC LIMIT ?",
                    (status, status, limit),
                ).fetchall()
        return [_record(r) for r in rows]

    async def claim(
        self, run_id: str, *, owner: str, now: float, ttl: float, takeover_from: str | None = None
    ) -> int:
        with self._write(fsync=False) as db:
            rec = self._row(db, run_id)
            live = rec.lease_owner is not None and (rec.lease_expires_at or 0) > now
            if live and rec.lease_owner != owner and rec.lease_owner != takeover_from:
                raise LeaseHeld(
                    f"run {run_id} is owned by {rec.lease_owner} until "
                    f"{rec.lease_expires_at:.0f}; wait for the lease to lapse or stop that worker"
                )
            epoch = rec.epoch + 1
            db.execute(
                "UPDATE runs SET epoch = ?, lease_owner = ?, lease_expires_at = ? WHERE run_id = ?",
                (epoch, owner, now + ttl, run_id),
            )
        return epoch

    async def renew(self, run_id: str, *, owner: str, epoch: int, now: float, ttl: float) -> None:
        with self._write(fsync=False) as db:
            cur = db.execute(
                "UPDATE runs SET lease_expires_at = ? "
                "WHERE run_id = ? AND epoch = ? AND lease_owner = ?",
                (now + ttl, run_id, epoch, owner),
            )
            if cur.rowcount != 1:
                self._row(db, run_id)
                raise Fenced(f"run {run_id}: lease of {owner} at epoch {epoch} was taken over")

    async def release(self, run_id: str, *, owner: str, epoch: int) -> None:
        with self._write(fsync=False) as db:
            db.execute(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE run_id = ? AND epoch = ? AND lease_owner = ?",
                (run_id, epoch, owner),
            )

    async def claim_next(
        self,
        *,
        owner: str,
        now: float,
        ttl: float,
        limit: int = 1,
        agents: Sequence[str] | None = None,
    ) -> list[Claim]:
        if limit < 1 or (agents is not None and not agents):
            return []
        by_agent = "" if agents is None else f" AND agent IN ({', '.join('?' * len(agents))})"
        claimable = ", ".join(f"'{s}'" for s in CLAIMABLE)
        # BEGIN IMMEDIATE holds SQLite's one write lock from the select to the updates: no
        # other process can claim (or append to) these rows in between. No fsync, as for
        # ``claim``: the first event under the new epoch makes the claim durable with it.
        with self._write(fsync=False) as db:
            # Unheld runs, then held ones whose lease lapsed: each half uses its own index
            # (migration 0002), so a claim never scans the finished runs.
            columns = "run_id, agent, status, epoch, lease_owner, updated_at"
            rows = db.execute(
                f"SELECT {columns} FROM runs WHERE lease_owner IS NULL "
                f"AND status IN ({claimable}){by_agent} "
                f"UNION ALL SELECT {columns} FROM runs WHERE lease_owner IS NOT NULL "
                "AND (lease_expires_at IS NULL OR lease_expires_at <= ?) "
                f"AND status IN ({claimable}){by_agent} "
                "ORDER BY updated_at LIMIT ?",
                (*(agents or ()), now, *(agents or ()), limit),
            ).fetchall()
            claims = []
            for run_id, agent, status, epoch, previous, _ in rows:
                db.execute(
                    "UPDATE runs SET epoch = ?, lease_owner = ?, lease_expires_at = ? "
                    "WHERE run_id = ?",
                    (epoch + 1, owner, now + ttl, run_id),
                )
                claims.append(
                    Claim(
                        run_id=run_id,
                        agent=agent,
                        status=status,
                        epoch=epoch + 1,
                        previous_owner=previous,
                    )
                )
        return claims

    async def wait_changed(self, run_id: str, after_seq: int, timeout: float) -> int:  # noqa: ASYNC109
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
        # No notices cross processes on SQLite: a worker polls ``claim_next`` at its pace.
        await asyncio.sleep(max(0.0, timeout))

    async def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- introspection for tests and benchmarks ---------------------------------------------

    def payload_bytes(self, run_id: str) -> int:
        """Bytes of event data plus snapshot state stored for one run."""
        with self._read() as db:
            ev = db.execute(
                "SELECT COALESCE(SUM(LENGTH(CAST(data AS BLOB))), 0) FROM events WHERE run_id = ?",
                (run_id,),
            ).fetchone()[0]
            sn = db.execute(
                "SELECT COALESCE(SUM(LENGTH(CAST(state AS BLOB))), 0) FROM snapshots "
                "WHERE run_id = ?",
                (run_id,),
            ).fetchone()[0]
        return int(ev) + int(sn)


def _pack(state: dict[str, Any]) -> bytes:
    """A snapshot row: the zlib-compressed ``snapshot_text`` (JSON and its checksum).

    A snapshot holds the whole conversation, which the log already holds once; compressing
    the copy (and so the pages each rewrite frees) keeps a run's size close to its content.
    """
    return zlib.compress(snapshot_text(state).encode("utf-8"), 1)


def _unpack(data: bytes) -> dict[str, Any] | None:
    if data[:1] in (b"{", b"s"):  # not compressed (written by hand, or by an older stead)
        return snapshot_state(data.decode("utf-8"))
    return snapshot_state(zlib.decompress(data).decode("utf-8"))


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


def _tool_of(events: Sequence[Event]) -> str | None:
    for e in events:
        name = getattr(e, "name", None)
        if isinstance(name, str):
            return name
    return None


def _statements(sql: str) -> list[str]:
    """Split a migration file into statements (our files hold no ';' inside literals)."""
    lines = [ln for ln in sql.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
