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
    "created_at) VALUES ((SELECT run_no FROM runs WHERE run_id = ?1), ?1, ?2, ?3, ?4, "
    "NULLIF(?5, ''), NULLIF(?6, 0), ?7, ?8)"
)
"""An event row; its run's number (migration 0008: what the events are indexed by) is read
from the runs row, which the append's guard has just written, so its page is at hand. Its
parameters are ``_events``'s: no None among them (see there)."""
_NO_TURN = ""
"""``_events``'s turn index for none: text, which no turn index (an int) equals."""
_NO_CALL = 0
"""``_events``'s tool call id for none: an int, which no call id (a str) equals."""
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
    if db.execute(_GUARD, _guard(a)).rowcount != 1:
        return False
    events = _events(a, [])
    if len(events) == 1:
        db.execute(_INSERT_EVENT, events[0])
    else:
        db.executemany(_INSERT_EVENT, events)
    if a[7] is not None:
        db.execute(_SNAPSHOT, (a[0], *a[7]))
    return True


def refusal(db: sqlite3.Cursor, a: _sql.Append) -> Exception:
    """``SQLStore.refusal`` of an append whose guard did not hold, read in its transaction
    (a batch member's, or an append's written alone), on a cursor of its own: the
    transaction's keeps to statements that finish as they run (``_link.Link``)."""
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
    """The ``_INSERT_EVENT`` parameters of a new run's first event (sequence 1): ``_events``
    of an append of that one row after sequence 0."""
    run_id, _, _, _, now = row[:5]
    return _events((run_id, (), [row[5:]], 0, 0, "queued", now, None, True), [])[0]


def _guard(a: _sql.Append) -> tuple[Any, ...]:
    """The ``_GUARD`` parameters of an append: its run moves to the sequence after its rows
    only if it is still at the epoch and sequence the append expects."""
    return (a[3] + len(a[2]), a[5], a[6], a[0], a[4], a[3])


def _events(a: _sql.Append, out: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``out`` with the ``_INSERT_EVENT`` parameters of the append's rows added, numbered
    after the sequence it expects, every one of a type the ``sqlite3`` module binds as it is.

    It looks any other up in its adapter registry first (a key tuple, a dict lookup, two
    attribute lookups: about 3k instructions a parameter, where binding an int costs a few
    hundred), None and bytes included, and most rows have a None (a turn's events no call
    id, a run's none of either). So a missing turn index or call id goes as a value of the
    other type, which the statement turns back into NULL (``NULLIF``), and compressed data as
    a ``bytearray`` (stored as the same BLOB)."""
    run_id, seq, now = a[0], a[3], a[6]
    for kind, version, turn, call, data in a[2]:
        seq += 1
        out.append(
            (
                run_id,
                seq,
                kind,
                version,
                _NO_TURN if turn is None else turn,
                _NO_CALL if call is None else call,
                data if isinstance(data, str) else bytearray(data),
                now,
            )
        )
    return out


def _params(
    appends: Sequence[_sql.Append], events: list[tuple[Any, ...]] | None = None
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The parameters of a batch's ``appends``, by ``put``'s definitions: their ``_GUARD``s,
    their rows' ``_INSERT_EVENT``s (after ``events``) and their ``_SNAPSHOT``s, built before
    the guards run: only a batch whose guard fails, which is rare, built its rows for
    nothing."""
    rows_out: list[tuple[Any, ...]] = [] if events is None else events
    for a in appends:
        _events(a, rows_out)
    snapshots = [(a[0], *a[7]) for a in appends if a[7] is not None]
    return [_guard(a) for a in appends], rows_out, snapshots
