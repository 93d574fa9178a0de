"""PostgreSQL's group commit: a batch of appends of different runs as ONE statement.

``GroupCommit`` hands ``PostgresStore._append_many`` the appends that arrived together (at a
thousand runs in flight, hundreds of them). Written as one ``_append`` statement a member,
pipelined, each member cost the client about 200 µs of Python: psycopg converts, dumps,
prepares and sends every statement, and then polls the connection for results, a wait on the
event loop each. This writes the whole batch as one set-based statement instead, every
column of the members a binary array (``%b``: psycopg packs a list of ints, floats, text or
bytes without quoting it into array syntax, about a microsecond an element):

* ``b``: one row per member (run, expected sequence, epoch, new last_seq, status, whether
  that status is claimable, the run's notice channel, its ``now``);
* ``upd``: ``UPDATE runs ... FROM b`` with each member's epoch and sequence checks in the
  ``WHERE``, as in the statement of one append: a member whose guard fails matches no row,
  and is absent from what the statement returns;
* ``ins`` / ``snap``: the members' event rows and snapshots, inserted only for the runs
  ``upd`` returned;
* the final ``SELECT``: each written run's notices, as one append sends them.

One statement is one transaction (autocommit), one round trip and one flush, whatever the
batch's size. A run may appear twice in a batch (a steering writer and the owner appending at
once); one ``UPDATE`` cannot apply two changes to one row in order, so the batch is cut into
segments in which each run appears once, written in order in one transaction (``segments``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from stead.store import sql as _sql
from stead.store.postgres._append import UNSYNCED
from stead.store.sql import CLAIMABLE

_MEMBERS = (
    "WITH b AS (SELECT * FROM unnest(%(runs)b::text[], %(expected)b::int8[], %(epochs)b::int8[],"
    " %(seqs)b::int8[], %(statuses)b::text[], %(claimable)b::bool[], %(channels)b::text[],"
    " %(nows)b::float8[]) AS b(run_id, expected, epoch, seq, status, claimable, channel, now)),"
    " upd AS ("
    " UPDATE runs r SET last_seq = b.seq, status = b.status, updated_at = b.now FROM b"
    " WHERE r.run_id = b.run_id AND r.epoch = b.epoch AND r.last_seq = b.expected"
    " RETURNING r.run_id, r.run_no, r.lease_owner, b.seq, b.claimable, b.channel, b.now),"
    " ins AS ("
    " INSERT INTO events (run_no, run_id, seq, kind, version, turn_index, tool_call_id, data,"
    " created_at)"
    " SELECT u.run_no, e.run_id, e.seq, e.kind, e.version, e.turn_index, e.tool_call_id, e.data,"
    " u.now"
    " FROM unnest(%(e_runs)b::text[], %(e_seqs)b::int8[], %(kinds)b::text[],"
    " %(versions)b::int4[], %(turns)b::int4[], %(calls)b::text[], %(datas)b::bytea[])"
    " AS e(run_id, seq, kind, version, turn_index, tool_call_id, data)"
    " JOIN upd u ON u.run_id = e.run_id)"
)
_SNAPSHOTS = (
    ", snap AS ("
    " INSERT INTO snapshots (run_id, seq, version, state)"
    " SELECT s.run_id, s.seq, s.version, s.state"
    " FROM unnest(%(s_runs)b::text[], %(s_seqs)b::int8[], %(s_versions)b::int4[],"
    " %(s_states)b::bytea[]) AS s(run_id, seq, version, state)"
    " WHERE s.run_id IN (SELECT run_id FROM upd)"
    " ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, version = excluded.version,"
    " state = excluded.state)"
)
_NOTICES = (
    " SELECT run_id, pg_notify(channel, run_id || ':' || seq),"
    " CASE WHEN lease_owner IS NULL AND claimable"
    " THEN pg_notify(%(ready)s, run_id || ':' || seq) END{unsynced}"
    " FROM upd"
)


@functools.cache
def statement(snapshots: bool, sync: bool) -> str:
    """The batch statement (with a snapshot CTE when a member carries one; synced)."""
    return (
        _MEMBERS
        + (_SNAPSHOTS if snapshots else "")
        + _NOTICES.format(unsynced="" if sync else f", {UNSYNCED}")
    )


def segments(batch: Sequence[_sql.Append]) -> list[list[_sql.Append]]:
    """``batch`` cut, in order, into runs of members whose runs are all different (nearly
    always one: a run appends once at a time, unless another writer appends it too)."""
    out: list[list[_sql.Append]] = [[]]
    seen: set[str] = set()
    for a in batch:
        if a[0] in seen:
            out.append([])
            seen.clear()
        seen.add(a[0])
        out[-1].append(a)
    return out


def params(segment: Sequence[_sql.Append], channel: Any, ready: str) -> tuple[bool, dict[str, Any]]:
    """(whether a member carries a snapshot, the parameters of ``statement``) for a segment;
    ``channel(run_id)`` is a run's notice channel, ``ready`` the claimable one."""
    runs: list[str] = []
    seqs: list[int] = []
    e_runs: list[str] = []
    e_seqs: list[int] = []
    kinds: list[str] = []
    versions: list[int] = []
    turns: list[int | None] = []
    calls: list[str | None] = []
    datas: list[Any] = []
    s_runs: list[str] = []
    s_seqs: list[int] = []
    s_versions: list[int] = []
    s_states: list[bytes] = []
    for run_id, _, rows, expected, _, _, _, snapshot, _ in segment:
        runs.append(run_id)
        seq = expected
        for kind, version, turn, call, data in rows:
            seq += 1
            e_runs.append(run_id)
            e_seqs.append(seq)
            kinds.append(kind)
            versions.append(version)
            turns.append(turn)
            calls.append(call)
            datas.append(data)
        seqs.append(seq)
        if snapshot is not None:
            s_runs.append(run_id)
            s_seqs.append(snapshot[0])
            s_versions.append(snapshot[1])
            s_states.append(snapshot[2])
    out: dict[str, Any] = {
        "runs": runs,
        "expected": [a[3] for a in segment],
        "epochs": [a[4] for a in segment],
        "seqs": seqs,
        "statuses": [a[5] for a in segment],
        "claimable": [a[5] in CLAIMABLE for a in segment],
        "channels": [channel(r) for r in runs],
        "nows": [a[6] for a in segment],
        "e_runs": e_runs,
        "e_seqs": e_seqs,
        "kinds": kinds,
        "versions": versions,
        "turns": turns,
        "calls": calls,
        "datas": datas,
        "ready": ready,
    }
    if s_runs:
        out.update(s_runs=s_runs, s_seqs=s_seqs, s_versions=s_versions, s_states=s_states)
    return bool(s_runs), out
