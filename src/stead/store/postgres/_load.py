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

from stead.errors import RunNotFound, SteadError
from stead.store.postgres import _chunks
from stead.store.sql import (
    CLAIMABLE_SQL,
    RUN_COLUMNS,
    Claim,
    Loaded,
    decode_events,
    record,
    snapshot_of,
)

_COLUMNS = RUN_COLUMNS.split(", ")
_RUN = ", ".join(f"r.{c}" for c in _COLUMNS)


def _rows_of(r: str, extra: int = 0) -> str:
    """The statement reading, for each run of the CTE ``r`` (the row's columns, snap_seq,
    state, after, run_no, and ``extra`` more), its row, tail and snapshot pieces."""
    nulls = ", NULL" * (len(_COLUMNS) + 4 + extra)
    return (
        f"WITH {r}"
        " SELECT r.run_id AS key, 0 AS part, NULL::bigint AS seq, NULL::text, NULL::int,"
        " NULL::bytea, NULL::float8, r.* FROM r"
        " UNION ALL"
        " SELECT r.run_id, 1, e.seq, e.kind, e.version, e.data, e.created_at"
        f"{nulls}"
        " FROM r JOIN events e ON e.run_no = r.run_no AND e.seq > r.after AND e.seq <= r.last_seq"
        " UNION ALL"
        " SELECT r.run_id, 2, NULL, c.digest, NULL, c.data, NULL"
        f"{nulls}"
        " FROM r JOIN snapshot_chunks c ON c.run_id = r.run_id WHERE r.after > 0"
        " ORDER BY key, part, seq"
    )


_SNAPSHOT = (
    "s.seq AS snap_seq, s.state,"
    " CASE WHEN s.seq > 0 AND s.seq <= r.last_seq THEN s.seq ELSE 0 END AS after, r.run_no"
)

LOAD = _rows_of(
    f"r AS (SELECT {_RUN}, {_SNAPSHOT} FROM runs r LEFT JOIN snapshots s ON s.run_id = r.run_id"
    " WHERE r.run_id = ANY(%s))"
)
"""(key, part, seq, kind, version, data, created_at, *RUN_COLUMNS, snap_seq, state, after,
run_no) of every run in the array: each run's row first (part 0), then its tail (part 1),
read by the run's number (migration 0009), then its snapshot's pieces (part 2: digest as
``kind``, ``data``; ``_chunks``); ``key`` is the run's id in every row."""

_NEW_LEASE = {"epoch": "c.epoch", "lease_owner": "c.lease_owner", "lease_expires_at": "c.until"}


def claim_and_load(picking: str) -> str:
    """``LOAD`` of the runs a claim takes, in the claim's own statement: ``picking`` is the
    CTEs choosing them, the last ``picked(run_id, lease_owner)`` (locked); ``claimed`` takes
    each lease (its epoch bumped) and returns the row as locked. The rest of the statement
    sees the database as it was when the statement began, so each run's row in ``r`` is that
    one, with the new lease's columns from ``claimed``, and the locked row's ``last_seq``
    beside it: the two differ only when a write committed between the statement's start and
    the lock, and then the tail read is not the whole log (``claims`` leaves it out). Each
    part-0 row ends with the claim's (agent, status, previous owner, locked last_seq)."""
    run = ", ".join(_NEW_LEASE.get(c, f"r.{c}") for c in _COLUMNS)
    return _rows_of(
        f"{picking},"
        " claimed AS (UPDATE runs u SET epoch = u.epoch + 1, lease_owner = %(owner)s,"
        " lease_expires_at = %(until)s FROM picked WHERE u.run_id = picked.run_id"
        " RETURNING u.run_id, u.agent, u.status, u.epoch, u.lease_owner,"
        " u.lease_expires_at AS until, u.last_seq, picked.lease_owner AS previous),"
        f" r AS (SELECT {run}, {_SNAPSHOT}, c.agent AS c_agent, c.status AS c_status,"
        " c.previous, c.last_seq AS locked_seq"
        " FROM claimed c JOIN runs r ON r.run_id = c.run_id"
        " LEFT JOIN snapshots s ON s.run_id = r.run_id)",
        extra=4,
    )


_HEAD = 6
"""Where the run's columns start in a row of ``LOAD`` without its key."""
_UPDATED = _COLUMNS.index("updated_at")


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


def claims(rows: Sequence[Sequence[Any]]) -> list[Claim]:
    """The claims of ``claim_and_load``'s rows, the least recently updated run first (as the
    claim picked them)."""
    runs = sorted(by_run(rows).items(), key=lambda kv: kv[1][0][_HEAD + _UPDATED])
    return [_claimed(run_id, run_rows) for run_id, run_rows in runs]


def _claimed(run_id: str, rows: Sequence[Sequence[Any]]) -> Claim:
    """The ``Claim`` of one run from the rows of ``claim_and_load``, with what was read of it
    when that is the whole log at the locked row (else None: the claimant reads it). A run
    whose rows do not read back (damaged) is claimed all the same: the claimant's own read
    then names the damage for that run alone."""
    head = rows[0][_HEAD:]
    agent, status, previous, locked_seq = head[len(_COLUMNS) + 4 :]
    loaded_run: Loaded | None = None
    if locked_seq == head[_COLUMNS.index("last_seq")]:  # the row seen is the row locked
        try:
            loaded_run = loaded(run_id, [r[: _HEAD + len(_COLUMNS) + 4] for r in rows])
        except SteadError:
            loaded_run = None
    return Claim(
        run_id=run_id,
        agent=agent,
        status=status,
        epoch=head[_COLUMNS.index("epoch")],
        previous_owner=previous,
        loaded=loaded_run,
    )


_CLAIM_HALF = (
    "SELECT run_id, lease_owner, updated_at FROM runs"
    " WHERE {held} AND status IN (" + CLAIMABLE_SQL + ")"
    " AND (%(any_agent)s OR agent = ANY(%(agents)s))"
    # a run pinned to another agent version is not ours (run_pins)
    " AND (%(any_version)s OR NOT EXISTS (SELECT 1 FROM run_pins p"
    " WHERE p.run_id = runs.run_id AND p.fingerprint <> ALL(%(versions)s)))"
    " ORDER BY updated_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
)
CLAIM_NEXT = claim_and_load(
    "unheld AS (" + _CLAIM_HALF.format(held="lease_owner IS NULL") + "),"
    " lapsed AS ("
    + _CLAIM_HALF.format(
        held="lease_owner IS NOT NULL AND COALESCE(lease_expires_at, 0) <= %(now)s"
    )
    + "),"
    " picked AS (SELECT run_id, lease_owner FROM"
    " (SELECT * FROM unheld UNION ALL SELECT * FROM lapsed) AS c"
    " ORDER BY updated_at LIMIT %(limit)s)"
)
"""``claim_next``'s statement: the oldest claimable runs, nobody's or with a lapsed lease,
up to ``limit``, each with its row, snapshot and tail (``claim_and_load``). Each half
reads its own index: the runs nobody holds by ``updated_at``, the held ones by when their
lease lapses; neither reads a run whose lease is live, however many the fleet holds. A run
the other half locked but did not pick is free again when the statement commits."""
