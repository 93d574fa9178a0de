"""The statements of an append on SQLite, for one append and for a batch of them.

``SQLiteStore`` runs these on whichever connection holds the write transaction: the loop's
for a run alone, the batch's (committed on the writer thread, ``stead.store.sqlite._writer``)
for many. One definition of each statement's parameters serves both shapes, so an append
written alone and one written in a batch are the same rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from stead.store import sql as _sql
from stead.store.sql import append_refusal

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
_INSERT_RUN = (
    "INSERT INTO runs (run_id, agent, session_id, correlation_id, status, last_seq, epoch, "
    "created_at, updated_at) VALUES (?, ?, ?, ?, 'queued', 1, 0, ?, ?)"
)
_SNAPSHOT = (
    "INSERT INTO snapshots (run_id, seq, version, state) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, "
    "version = excluded.version, state = excluded.state"
)


class NewRun(tuple[Any, ...]):
    """A new run's row (``SQLStore._create``'s) as a member of a batch of appends."""

    __slots__ = ()


def put(db: sqlite3.Cursor, a: _sql.Append) -> bool:
    """Write one append inside the caller's write transaction if its guard holds; False (and
    nothing written) when the run is not at the expected sequence and epoch."""
    # The epoch and sequence checks and the write they guard are one statement in the
    # write transaction: a stale owner or a stale sequence changes nothing.
    guards, events, snapshots = _params((a,))
    if db.execute(_GUARD, guards[0]).rowcount != 1:
        return False
    if len(events) == 1:
        db.execute(_INSERT_EVENT, events[0])
    else:
        db.executemany(_INSERT_EVENT, events)
    if snapshots:
        db.execute(_SNAPSHOT, snapshots[0])
    return True


def refusal(db: sqlite3.Cursor, a: _sql.Append) -> Exception:
    """``SQLStore.refusal`` of an append whose guard did not hold, read in its transaction
    (a batch member's, or an append's written alone), on a cursor of its own: the
    transaction's keeps to statements that finish as they run (``_store._Link``)."""
    row = db.connection.execute(_sql.SQLStore.POSITION, (a[0],)).fetchone()
    return append_refusal(a[0], row, a[4], a[3])


def put_batch(db: sqlite3.Cursor, batch: Sequence[Any]) -> list[bool]:
    """``put`` of each member in order (``put_run`` of a new run's), in a few statements
    for the whole batch when every guard holds (the usual case): the new runs, the guards,
    then every member's events, then the snapshots. ``executemany`` runs the guards in order
    (a second append of one run sees the first's), but tells only how many held; when one
    did not, the batch is rolled back and each member written alone, which says whose guard
    failed. (A run's append never shares a batch with its creation: it waits for it.)"""
    if len(batch) > 1:
        runs = [m for m in batch if isinstance(m, NewRun)]
        appends = [m for m in batch if not isinstance(m, NewRun)] if runs else batch
        if runs:
            db.executemany(_INSERT_RUN, [_run_params(r) for r in runs])
        guards, events, snapshots = _params(appends, [_first_event_params(r) for r in runs])
        if not guards or db.executemany(_GUARD, guards).rowcount == len(guards):
            db.executemany(_INSERT_EVENT, events)
            if snapshots:
                db.executemany(_SNAPSHOT, snapshots)
            return [True] * len(batch)
        db.execute("ROLLBACK")
        db.execute("BEGIN IMMEDIATE")
    return [put_run(db, m) if isinstance(m, NewRun) else put(db, m) for m in batch]


def put_run(db: sqlite3.Cursor, row: _sql.Row) -> bool:
    """Insert a new run and its first event (``SQLStore._create``'s row)."""
    db.execute(_INSERT_RUN, _run_params(row))
    db.execute(_INSERT_EVENT, _first_event_params(row))
    return True


def _run_params(row: _sql.Row) -> tuple[Any, ...]:
    """The ``_INSERT_RUN`` parameters of a new run's row (created and updated now)."""
    run_id, agent, session_id, correlation_id, now = row[:5]
    return (run_id, agent, session_id, correlation_id, now, now)


def _first_event_params(row: _sql.Row) -> tuple[Any, ...]:
    """The ``_INSERT_EVENT`` parameters of a new run's first event (sequence 1)."""
    run_id, _, _, _, now, kind, version, turn, call, data = row
    return (run_id, 1, kind, version, turn, call, data, now)


def _params(
    appends: Sequence[_sql.Append], events: list[tuple[Any, ...]] | None = None
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The parameters of ``appends``: their ``_GUARD``s, their rows' ``_INSERT_EVENT``s
    (after ``events``, numbered after the sequence each append expects) and their
    ``_SNAPSHOT``s. One pass and one call for an append alone or a whole batch (every append
    is here), before the guards run: only a batch whose guard fails, which is rare, built
    its rows for nothing. Each run moves to the sequence after its rows only if it is still
    at the epoch and sequence its append expects."""
    guards: list[tuple[Any, ...]] = []
    rows_out: list[tuple[Any, ...]] = [] if events is None else events
    snapshots: list[tuple[Any, ...]] = []
    for run_id, _, rows, expected, epoch, status, now, snapshot, _ in appends:
        guards.append((expected + len(rows), status, now, run_id, epoch, expected))
        seq = expected
        for kind, version, turn, call, data in rows:
            seq += 1
            rows_out.append((run_id, seq, kind, version, turn, call, data, now))
        if snapshot is not None:
            snapshots.append((run_id, *snapshot))
    return guards, rows_out, snapshots
