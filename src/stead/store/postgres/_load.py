"""PostgreSQL's ``load``: a run's row, its snapshot and the events after it in ONE statement.

``SQLStore.load`` reads the row with its snapshot, then the tail after the snapshot: two
statements and two round trips for every run a worker picks up. PostgreSQL answers both at
once: the statement's first row is the run's (with its snapshot's seq and state), the next
ones are the tail, in order, and the last ones the pieces of a long snapshot (``_chunks``),
when the snapshot is used. One statement also reads one snapshot of the database, so the
tail, the pieces and the row agree by construction.

The tail starts after the snapshot when the snapshot's seq is within the log (``0 < seq <=
last_seq``, what ``_sql.snapshot_of`` accepts), else at the start. A snapshot within the
log whose state turns out unreadable (damaged: its checksum fails) is a cache miss that the
one statement did not foresee: ``loaded`` says so (None) and the store reads again the
shared way, which folds the whole log.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stead.errors import RunNotFound
from stead.store.postgres import _chunks
from stead.store.sql import RUN_COLUMNS, Loaded, decode_events, record, snapshot_of

_RUN = ", ".join(f"r.{c}" for c in RUN_COLUMNS.split(", "))

LOAD = (
    f"WITH r AS (SELECT {_RUN}, s.seq AS snap_seq, s.state,"
    " CASE WHEN s.seq > 0 AND s.seq <= r.last_seq THEN s.seq ELSE 0 END AS after"
    " , r.run_no FROM runs r LEFT JOIN snapshots s ON s.run_id = r.run_id"
    " WHERE r.run_id = ANY(%s))"
    " SELECT r.run_id AS key, 0 AS part, NULL::bigint AS seq, NULL::text, NULL::int,"
    " NULL::bytea, NULL::float8, r.* FROM r"
    " UNION ALL"
    " SELECT r.run_id, 1, e.seq, e.kind, e.version, e.data, e.created_at"
    f"{', NULL' * (len(RUN_COLUMNS.split(', ')) + 4)}"
    " FROM r JOIN events e ON e.run_no = r.run_no AND e.seq > r.after AND e.seq <= r.last_seq"
    " UNION ALL"
    " SELECT r.run_id, 2, NULL, c.digest, NULL, c.data, NULL"
    f"{', NULL' * (len(RUN_COLUMNS.split(', ')) + 4)}"
    " FROM r JOIN snapshot_chunks c ON c.run_id = r.run_id WHERE r.after > 0"
    " ORDER BY key, part, seq"
)
"""(key, part, seq, kind, version, data, created_at, *RUN_COLUMNS, snap_seq, state, after,
run_no) of every run in the array: each run's row first (part 0), then its tail (part 1),
read by the run's number (migration 0009), then its snapshot's pieces (part 2: digest as
``kind``, ``data``; ``_chunks``); ``key`` is the run's id in every row."""

_HEAD = 6
"""Where the run's columns start in a row of ``LOAD`` without its key."""


def by_run(rows: Sequence[Sequence[Any]]) -> dict[str, list[Sequence[Any]]]:
    """The rows of ``LOAD`` by run, each without its key."""
    out: dict[str, list[Sequence[Any]]] = {}
    for row in rows:
        out.setdefault(row[0], []).append(row[1:])
    return out


def loaded(run_id: str, rows: Sequence[Sequence[Any]]) -> Loaded | None:
    """``Loaded`` from the rows of ``LOAD``; None when the snapshot the statement read the
    tail after is unreadable, or its pieces cannot be put back (read again: the log is
    folded from the start)."""
    if not rows:
        raise RunNotFound(run_id)
    head = rows[0][_HEAD:]
    rec = record(head)
    snapshot, snap_seq = snapshot_of(head[11], head[12], rec.last_seq)
    if snap_seq != head[13]:
        return None
    end = len(rows)
    while end > 1 and rows[end - 1][0] == 2:
        end -= 1
    if snapshot is not None:
        snapshot = _chunks.put_back(snapshot, [(r[2], r[4]) for r in rows[end:]])
        if snapshot is None:
            return None
    tail = decode_events(run_id, [r[1:_HEAD] for r in rows[1:end]], snap_seq, rec.last_seq)
    return Loaded(record=rec, snapshot=snapshot, snapshot_seq=snap_seq, tail=tail)
