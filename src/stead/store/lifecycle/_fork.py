"""Writing a fork: its ``run_created`` and ``run_forked``, its link to the source and (for a
conversation's run) the first message of its conversation branch, in ONE transaction, so
a crash during a fork leaves the whole fork or nothing of it (never a fork without its
lineage, which retention relies on to keep the source)."""

from __future__ import annotations

from stead import _crash
from stead.core.events import RunCreated, RunForked
from stead.errors import Conflict
from stead.store.lifecycle._transfer import atomic, q, sql_store
from stead.store.sql import Duplicate, Store, created_row, dumps, event_row

_INSERT_EVENT = (
    "INSERT INTO events (run_no, run_id, seq, kind, version, turn_index, tool_call_id, data, "
    "created_at) VALUES ((SELECT run_no FROM runs WHERE run_id = ?), ?, ?, ?, ?, ?, ?, ?, ?)"
)


async def create_fork(store: Store, created: RunCreated, forked: RunForked, *, now: float) -> None:
    """Write the fork (queued, at seq 2). Both events are checked by the writer's rules
    first (``InvalidInput`` / ``InvalidEvent``); a run id that exists is a ``Conflict``."""
    s = sql_store(store)
    rows = [created_row(created), event_row(forked)]
    if s.BYTES_DATA:
        rows = [(*r[:4], r[4].encode("utf-8") if isinstance(r[4], str) else r[4]) for r in rows]
    rid = created.run_id
    try:
        async with atomic(s) as tx:
            await tx.run(
                q(
                    s,
                    "INSERT INTO runs (run_id, agent, session_id, correlation_id, status, "
                    "last_seq, epoch, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, 'queued', 2, 0, ?, ?)",
                ),
                (rid, created.agent, created.session_id, created.correlation_id, now, now),
            )
            for seq, (kind, version, turn, call, data) in enumerate(rows, 1):
                await tx.run(
                    q(s, _INSERT_EVENT), (rid, rid, seq, kind, version, turn, call, data, now)
                )
            await tx.run(
                q(s, "INSERT INTO run_links (run_id, source_id, kind) VALUES (?, ?, 'fork')"),
                (rid, forked.source_run_id),
            )
            if created.session_id:
                await tx.run(
                    q(
                        s,
                        "INSERT INTO conversation_messages (conversation_id, position, "
                        "message_id, run_id, agent, input, created_at) "
                        "VALUES (?, 0, ?, ?, ?, ?, ?)",
                    ),
                    (
                        created.session_id,
                        rid,
                        rid,
                        created.agent,
                        dumps({"content": created.input, "attachments": []}),
                        now,
                    ),
                )
            _crash.point("before_fork_commit")
    except Duplicate as exc:
        raise Conflict(f"run {rid!r} already exists ({exc})") from exc
