"""PostgreSQL's append: its one statement and its parameters, the hot path of ``PostgresStore``.

An append is one statement (see ``stead.store.postgres``): a conditional ``UPDATE`` of the run's row
(the epoch and sequence checks are its ``WHERE``), the event inserts, the snapshot and the
notices, chained as CTEs that write only when the ``UPDATE`` matched. The events are keyed by
the run's number (migration 0009), which that ``UPDATE`` returns: no lookup of its own.

**Rows as scalars.** The events of an append went as six arrays ``unnest``-ed by the server.
psycopg adapts a Python list by inspecting its elements to choose an array type and then
quoting each element into PostgreSQL's array syntax (a regular expression per ``bytea``
element): that was a fifth of the Python time of a step with a hundred runs in flight. Most
appends carry one to four events, so those send each event's fields as plain parameters of
a ``VALUES`` list (adapted by type, in C), one statement text per row count, each prepared
once per connection by psycopg; a longer append (rare) keeps the arrays.
"""

from __future__ import annotations

import functools
from typing import Any

from stead.store import sql as _sql
from stead.store.sql import CLAIMABLE

UNSYNCED = "set_config('synchronous_commit', 'off', true)"
"""``SET LOCAL synchronous_commit = off`` as an expression, so it rides in the statement that
writes (one round trip, its transaction implicit). Put where it is evaluated once per row
written: a statement that writes nothing has nothing to flush."""

INLINE_ROWS = 16
"""Appends of up to this many events send them as scalars (``VALUES``); longer ones as arrays.
Measured adapting one append's parameters: about 15 µs a row as scalars, 100 µs as arrays.
The bound keeps the statement texts few (psycopg prepares each, per connection, in an LRU of
100)."""

_NAMES = [(f"k{i}", f"v{i}", f"t{i}", f"c{i}", f"d{i}") for i in range(INLINE_ROWS)]
"""The parameter names of each inline row's (kind, version, turn, call, data)."""

_HEAD = (
    "WITH upd AS ("
    " UPDATE runs SET last_seq = %(seq)s, status = %(status)s, updated_at = %(now)s"
    " WHERE run_id = %(run)s AND epoch = %(epoch)s AND last_seq = %(expected)s"
    " RETURNING lease_owner, run_no),"
    " ins AS ("
    " INSERT INTO events (run_no, run_id, seq, kind, version, turn_index, tool_call_id, data,"
    " created_at)"
    " SELECT upd.run_no, %(run)s, u.seq, u.kind, u.version, u.turn_index, u.tool_call_id,"
    " u.data, %(now)s"
    " FROM {rows} AS u(seq, kind, version, turn_index, tool_call_id, data), upd)"
)
_ARRAYS = (
    "unnest(%(seqs)s::bigint[], %(kinds)s::text[], %(versions)s::int[],"
    " %(turns)s::int[], %(calls)s::text[], %(datas)s::bytea[])"
)
_SNAPSHOT = (
    ", snap AS ("
    " INSERT INTO snapshots (run_id, seq, version, state)"
    " SELECT %(run)s, %(snap_seq)s, %(snap_v)s, %(snap)s WHERE EXISTS (SELECT 1 FROM upd)"
    " ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, version = excluded.version,"
    " state = excluded.state)"
)
_TAIL = (
    " SELECT pg_notify(%(changed)s, %(payload)s),"
    " CASE WHEN lease_owner IS NULL AND %(claimable)s"
    " THEN pg_notify(%(ready)s, %(payload)s) END{unsynced}"
    " FROM upd"
)


def _values(n: int) -> str:
    rows = (
        f"(%(expected)s::bigint + {i + 1}, %({k})s::text, %({v})s::int, %({t})s::int,"
        f" %({c})s::text, %({d})s::bytea)"
        for i, (k, v, t, c, d) in enumerate(_NAMES[:n])
    )
    return f"(VALUES {', '.join(rows)})"


@functools.cache
def _statement(inline: int, snapshot: bool, sync: bool) -> str:
    """The append statement by (inline rows, 0 for arrays; with a snapshot; synced)."""
    return (
        _HEAD.format(rows=_values(inline) if inline else _ARRAYS)
        + (_SNAPSHOT if snapshot else "")
        + _TAIL.format(unsynced="" if sync else f", {UNSYNCED}")
    )


def statement(a: _sql.Append, sync: bool) -> str:
    """The statement of append ``a`` (committed synced if ``sync``)."""
    n = len(a[2])
    return _statement(n if n <= INLINE_ROWS else 0, a[7] is not None, sync)


def params(a: _sql.Append, changed: str, ready: str) -> dict[str, Any]:
    """The parameters of ``statement(a)``; ``changed`` and ``ready`` are the run's notice
    channel and the claimable one."""
    run_id, _, rows, expected, epoch, status, now, snapshot, _ = a
    seq = expected + len(rows)
    out: dict[str, Any] = {
        "run": run_id,
        "seq": seq,
        "status": status,
        "now": now,
        "epoch": epoch,
        "expected": expected,
        "changed": changed,
        "ready": ready,
        "payload": f"{run_id}:{seq}",
        "claimable": status in CLAIMABLE,
    }
    if len(rows) <= INLINE_ROWS:
        for names, row in zip(_NAMES, rows, strict=False):
            out.update(zip(names, row, strict=True))
    else:
        out.update(
            seqs=list(range(expected + 1, seq + 1)),
            kinds=[r[0] for r in rows],
            versions=[r[1] for r in rows],
            turns=[r[2] for r in rows],
            calls=[r[3] for r in rows],
            datas=[r[4] for r in rows],
        )
    if snapshot is not None:
        out.update(snap_seq=snapshot[0], snap_v=snapshot[1], snap=snapshot[2])
    return out
