"""Pruning: deleting the runs a retention policy lets go, in small transactions (what may go
is ``stead.core.retention``'s decision; docs/lifecycle.md).

A pass reads candidates (finished runs nobody holds, older than the shortest time any policy
keeps their status, or past an agent's cap), adds the runs made from them (forks, the next
run of a conversation) until that set is closed, asks the core which may go, and deletes
them dependents first, ``batch`` runs a transaction. Each delete re-checks, in its own
transaction, that the run is as it was judged (same status and sequence, no lease) and that
nothing is made from it any more, so a run resumed, forked or continued meanwhile stays.

Everything of a run goes with it: its row, events, snapshot (and PostgreSQL's snapshot
pieces), execution-ledger keys, events and progress, conversation messages, links and pin.
The text a process streamed for watchers (``Runtime(share_progress=True)``, keys
``run:RUN:TURN`` in ``ledger_progress``) goes once no live writer can be behind it
(``sweep_shared_progress``): its run is gone or finished, or nobody holds the run's lease,
or the lease lapsed. A process killed mid-stream leaves such rows, which it would have
deleted at its next turn or its close; a live stream's run is leased to its writer.
Blobs go when no run and no message left refers to them (``sweep_blobs``). Space: SQLite
reuses the freed pages for new rows; ``vacuum`` gives them back to the file system.
PostgreSQL's autovacuum makes the dead rows reusable; the file shrinks only by
``VACUUM FULL``, which we leave to the operator.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stead import _crash
from stead.core.large_results import MEDIA_TYPE
from stead.core.retention import Candidate, Retention, Verdict, plan
from stead.core.states import FINISHED
from stead.store.lifecycle._transfer import _text, atomic, q
from stead.store.sql import SQLStore, decode_row

_FINISHED_SQL = ", ".join(f"'{s.value}'" for s in sorted(FINISHED, key=lambda s: s.value))
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_RESULT = re.compile(r"\[stead result (sha256:[0-9a-f]{64}) \d+ chars\]")
"""How a tool result stored by reference is named in its result's row."""
_STORED_RESULTS = "SELECT data FROM events WHERE run_no = ? AND kind = 'tool_result_recorded'"
_COLUMNS = "run_id, agent, status, updated_at, lease_owner, last_seq"


@dataclass(frozen=True, slots=True, kw_only=True)
class Judged:
    """A run that may go, as it was when judged (the delete re-checks it is still so)."""

    verdict: Verdict
    status: str
    last_seq: int


async def judge(
    store: SQLStore, policy: Retention, *, now: float, limit: int, after: tuple[float, str] | None
) -> tuple[list[Judged], tuple[float, str] | None]:
    """The runs that may go among the next ``limit`` candidates after ``after`` (a cursor of
    (updated_at, run_id), so that a pass moves past runs kept for their dependents), in the
    order they may be deleted (every run after the runs made from it); and the cursor to
    go on from (None: the end was reached)."""
    found: dict[str, tuple[Any, ...]] = {}
    cursor = after or (float("-inf"), "")
    last: tuple[float, str] | None = None
    page = "(updated_at > ? OR (updated_at = ? AND run_id > ?)) ORDER BY updated_at, run_id LIMIT ?"
    async with store._reading() as s:
        keep = policy.shortest_keep()
        rows: list[tuple[Any, ...]] = []
        for status, seconds in sorted(keep.items()):
            rows += [
                (*r, 0)
                for r in await s.all(
                    q(
                        store,
                        f"SELECT {_COLUMNS} FROM runs WHERE lease_owner IS NULL AND status = ? "
                        f"AND updated_at <= ? AND {page}",
                    ),
                    (status, now - seconds, cursor[0], cursor[0], cursor[1], limit),
                )
            ]
        if policy.capped():
            for (agent,) in await s.all("SELECT DISTINCT agent FROM runs"):
                cap = policy.for_agent(agent).max_runs
                if cap is not None:
                    rows += await _over_cap(store, s, agent, cap, cursor, limit)
        # The next ``limit`` candidates of every query, merged: a pass pages through them
        # all (a run kept for its dependents does not hold the ones after it back).
        for r in sorted(rows, key=lambda r: (r[3], r[0], -r[6])):
            if r[0] not in found:
                found[r[0]] = r
        if len(found) >= limit:
            kept = sorted(found.values(), key=lambda r: (r[3], r[0]))[:limit]
            found = {r[0]: r for r in kept}
            last = (kept[-1][3], kept[-1][0])
        dependents: dict[str, tuple[str, ...]] = {}
        todo = list(found)
        while todo and len(found) < limit * 8:
            wave, todo = todo, []
            made = await _made_from(store, s, wave)
            for rid in wave:
                dependents[rid] = made.get(rid, ())
            fresh = sorted({d for ds in made.values() for d in ds if d not in found})
            for row in await _rows(store, s, fresh):
                newer = await s.one(
                    q(
                        store,
                        f"SELECT COUNT(*) FROM runs WHERE agent = ? AND status IN "
                        f"({_FINISHED_SQL}) AND updated_at > ?",
                    ),
                    (row[1], row[3]),
                )
                found[row[0]] = (*row, int(newer[0]) if newer else 0)
                todo.append(row[0])
    candidates = [
        Candidate(
            run_id=rid,
            agent=f[1],
            status=f[2],
            finished_at=f[3],
            leased=f[4] is not None,
            newer=f[6],
            # a run whose dependents were not read (the set was capped) is kept this pass
            dependents=dependents.get(rid, ("?",)),
        )
        for rid, f in found.items()
    ]
    verdicts = plan(candidates, policy, now)
    going = {v.run_id: v for v in verdicts}
    ordered: list[Judged] = []
    placed: set[str] = set()

    def place(rid: str) -> None:
        if rid in placed:
            return
        placed.add(rid)
        for d in dependents.get(rid, ()):
            if d in going:
                place(d)
        f = found[rid]
        ordered.append(Judged(verdict=going[rid], status=f[2], last_seq=f[5]))

    for v in verdicts:
        place(v.run_id)
    return ordered, last


async def _over_cap(
    store: SQLStore, s: Any, agent: str, cap: int, cursor: tuple[float, str], limit: int
) -> list[tuple[Any, ...]]:
    """The oldest ``limit`` finished runs of ``agent`` after ``cursor`` that are not among its
    ``cap`` newest, each with how many finished runs of the agent are newer."""
    finished = f"agent = ? AND status IN ({_FINISHED_SQL})"
    edge = await s.one(
        q(
            store,
            f"SELECT updated_at, run_id FROM runs WHERE {finished} "
            "ORDER BY updated_at DESC, run_id DESC LIMIT 1 OFFSET ?",
        ),
        (agent, cap),
    )
    if edge is None:
        return []
    rows = await s.all(
        q(
            store,
            f"SELECT {_COLUMNS} FROM runs WHERE {finished} "
            "AND (updated_at < ? OR (updated_at = ? AND run_id <= ?)) "
            "AND (updated_at > ? OR (updated_at = ? AND run_id > ?)) "
            "ORDER BY updated_at, run_id LIMIT ?",
        ),
        (agent, edge[0], edge[0], edge[1], cursor[0], cursor[0], cursor[1], limit),
    )
    if not rows:
        return []
    newer = await s.one(
        q(
            store,
            f"SELECT COUNT(*) FROM runs WHERE {finished} "
            "AND (updated_at > ? OR (updated_at = ? AND run_id > ?))",
        ),
        (agent, rows[0][3], rows[0][3], rows[0][0]),
    )
    first = int(newer[0]) if newer else cap
    return [(*r, first - i) for i, r in enumerate(rows)]


def _marks(n: int) -> str:
    return ", ".join("?" * n)


async def _rows(store: SQLStore, s: Any, run_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    if not run_ids:
        return []
    sql = f"SELECT {_COLUMNS} FROM runs WHERE run_id IN ({_marks(len(run_ids))})"
    rows: list[tuple[Any, ...]] = await s.all(q(store, sql), list(run_ids))
    return rows


async def _made_from(store: SQLStore, s: Any, run_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Runs made from each of ``run_ids``: its forks, and the run answering the next
    message of its conversation (it reads its history from this one), created or not yet.
    Two statements for the whole set."""
    out: dict[str, list[str]] = {}
    if not run_ids:
        return {}
    marks = _marks(len(run_ids))
    forks = await s.all(
        q(store, f"SELECT source_id, run_id FROM run_links WHERE source_id IN ({marks})"),
        list(run_ids),
    )
    after = await s.all(
        q(
            store,
            "SELECT m.run_id, n.run_id FROM conversation_messages m JOIN conversation_messages n "
            "ON n.conversation_id = m.conversation_id AND n.position = m.position + 1 "
            f"WHERE m.run_id IN ({marks})",
        ),
        list(run_ids),
    )
    for source, made in [*forks, *after]:
        out.setdefault(source, []).append(made)
    return {k: tuple(sorted(v)) for k, v in out.items()}


_GUARDED_DELETE = (
    "DELETE FROM runs WHERE run_id = ? AND lease_owner IS NULL AND status = ? AND last_seq = ? "
    "AND NOT EXISTS (SELECT 1 FROM run_links l WHERE l.source_id = ?) "
    "AND NOT EXISTS (SELECT 1 FROM conversation_messages m JOIN conversation_messages n "
    "ON n.conversation_id = m.conversation_id AND n.position > m.position WHERE m.run_id = ?)"
)
_BELONGING = (
    "DELETE FROM snapshots WHERE run_id IN ({ids})",
    "DELETE FROM ledger_progress WHERE effect_id IN "
    "(SELECT effect_id FROM ledger_keys WHERE run_id IN ({ids}))",
    "DELETE FROM ledger_events WHERE effect_id IN "
    "(SELECT effect_id FROM ledger_keys WHERE run_id IN ({ids}))",
    "DELETE FROM ledger_keys WHERE run_id IN ({ids})",
    "DELETE FROM run_pins WHERE run_id IN ({ids})",
    "DELETE FROM run_search WHERE run_id IN ({ids})",
)
"""What else of the runs a batch deleted goes, a statement a table for the whole batch."""


async def delete(store: SQLStore, batch: Sequence[Judged]) -> tuple[list[str], set[str]]:
    """Delete ``batch`` in one transaction, each run only if it is still as judged; the ids
    deleted, and the blob digests their first events and messages referred to.

    Run by run, in the order given (the runs made from a run before it): its row under the
    guard, then its conversation message and link, which the guard of the run it was made
    from reads. Then the rest of every run deleted, one statement a table."""
    deleted: list[str] = []
    numbers: list[int] = []
    digests: set[str] = set()
    async with atomic(store) as s:
        for j in batch:
            rid = j.verdict.run_id
            head = await s.one(
                q(
                    store,
                    "SELECT r.run_no, e.kind, e.version, e.data, m.input, m.conversation_id "
                    "FROM runs r "
                    "LEFT JOIN events e ON e.run_no = r.run_no AND e.seq = 1 "
                    "LEFT JOIN conversation_messages m ON m.run_id = r.run_id WHERE r.run_id = ?",
                ),
                (rid,),
            )
            if head is None:
                continue
            if head[5] is not None and store.CONVERSATION_LOCK is not None:
                # A message sent to the conversation now commits before this guard reads
                # (and so keeps the run it needs) or waits until the delete has committed.
                await s.one(q(store, store.CONVERSATION_LOCK), (head[5],))
            if await s.run(q(store, _GUARDED_DELETE), (rid, j.status, j.last_seq, rid, rid)) != 1:
                continue
            if head[3] is not None:
                text = _text(head[3])
                decode_row(rid, 1, head[1], head[2], text)  # only a run_created is read here
                digests.update(_DIGEST.findall(text))
            if head[4] is not None:
                digests.update(_DIGEST.findall(head[4]))
            for (data,) in await s.all(q(store, _STORED_RESULTS), (int(head[0]),)):
                digests.update(_RESULT.findall(_text(data)))
            await s.run(q(store, "DELETE FROM conversation_messages WHERE run_id = ?"), (rid,))
            await s.run(q(store, "DELETE FROM run_links WHERE run_id = ?"), (rid,))
            deleted.append(rid)
            numbers.append(int(head[0]))
            _crash.point("during_prune_batch")
        if deleted:
            ids = _marks(len(deleted))
            await s.run(
                q(store, f"DELETE FROM events WHERE run_no IN ({_marks(len(numbers))})"), numbers
            )
            for sql in _BELONGING:
                await s.run(q(store, sql.format(ids=ids)), deleted)
            if store.dialect == "postgres":
                await s.run(
                    q(store, f"DELETE FROM snapshot_chunks WHERE run_id IN ({ids})"), deleted
                )
    return deleted, digests


_SHARED = "run:"
"""How the keys of shared streamed text begin (``share_key`` in the runtime)."""
_STALE_SHARED = (
    "effect_id = ? AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = ? "
    f"AND r.status NOT IN ({_FINISHED_SQL}) AND r.lease_owner IS NOT NULL "
    "AND r.lease_expires_at > ?)"
)
"""A shared stream's rows, unless its run is unfinished and leased until after now: the
guard is read in the delete's own statement, so a run claimed meanwhile keeps its text."""


async def sweep_shared_progress(store: SQLStore, *, now: float, apply: bool = True) -> int:
    """Delete the shared streamed text no live writer is behind (see the module); how many
    streams (a run's turn each) went, or with ``apply=False`` would go (nothing is deleted).
    Their keys are read first (the table holds text in flight only: a few rows a run
    streaming), then each is deleted (or looked for) under its guard."""
    async with store._reading() as s:
        keys = await s.all(
            q(
                store,
                "SELECT DISTINCT effect_id FROM ledger_progress WHERE substr(effect_id, 1, ?) = ?",
            ),
            (len(_SHARED), _SHARED),
        )
        if not apply:
            stale = q(store, f"SELECT 1 FROM ledger_progress WHERE {_STALE_SHARED} LIMIT 1")
            found = 0
            for (key,) in keys:
                if await s.one(stale, _guarded(key, now)) is not None:
                    found += 1
            return found
    if not keys:  # the usual case: no write lock taken
        return 0
    gone = 0
    async with store._writing(sync=False) as s:  # provisional text: lost with a crash anyway
        for (key,) in keys:
            if await s.run(
                q(store, f"DELETE FROM ledger_progress WHERE {_STALE_SHARED}"), _guarded(key, now)
            ):
                gone += 1
    return gone


def _guarded(key: object, now: float) -> tuple[str, str, float]:
    """The parameters of ``_STALE_SHARED`` for a key ``run:RUN:TURN``."""
    return str(key), str(key)[len(_SHARED) :].rpartition(":")[0], now


async def sweep_blobs(store: SQLStore, digests: set[str]) -> int:
    """Delete the blobs among ``digests`` that no run's first event and no conversation
    message refers to any more; how many. The references are read outside any write (every
    run's first event: a scan, done only when pruned runs had attachments); the runs created
    meanwhile are read again inside the delete's transaction."""
    if not digests:
        return 0
    async with store._reading() as s:
        top = await s.one("SELECT COALESCE(MAX(run_no), 0) FROM runs")
        mark = int(top[0]) if top else 0
        used = await _referenced(store, s, digests, after_run_no=None)
    async with atomic(store) as s:
        used |= await _referenced(store, s, digests - used, after_run_no=mark)
        gone = 0
        for d in sorted(digests - used):
            gone += await s.run(q(store, "DELETE FROM blobs WHERE digest = ?"), (d,))
    return gone


async def _referenced(
    store: SQLStore, s: object, digests: set[str], *, after_run_no: int | None
) -> set[str]:
    if not digests:
        return set()
    found: set[str] = set()
    where = "" if after_run_no is None else " WHERE r.run_no > ?"
    params = () if after_run_no is None else (after_run_no,)
    rows = await s.all(  # type: ignore[attr-defined]
        q(
            store,
            "SELECT e.data FROM runs r JOIN events e ON e.run_no = r.run_no AND e.seq = 1" + where,
        ),
        params,
    )
    for (data,) in rows:
        found.update(d for d in _DIGEST.findall(_text(data)) if d in digests)
    for (text,) in await s.all("SELECT input FROM conversation_messages"):  # type: ignore[attr-defined]
        found.update(d for d in _DIGEST.findall(text) if d in digests)
    # Tool results stored by reference (stead.core.large_results) are named by any result
    # row of any run (a fork's copies too): read only when such a result is in question.
    marks = ", ".join("?" * len(digests - found))
    results = (
        await s.all(  # type: ignore[attr-defined]
            q(store, f"SELECT digest FROM blobs WHERE media_type = ? AND digest IN ({marks})"),
            (MEDIA_TYPE, *sorted(digests - found)),
        )
        if digests - found
        else []
    )
    if results:
        where = "" if after_run_no is None else " AND r.run_no > ?"
        rows = await s.all(  # type: ignore[attr-defined]
            q(
                store,
                "SELECT e.data FROM runs r JOIN events e ON e.run_no = r.run_no "
                "WHERE e.kind = 'tool_result_recorded'" + where,
            ),
            params,
        )
        for (data,) in rows:
            found.update(d for d in _RESULT.findall(_text(data)) if d in digests)
    return found


async def vacuum(store: SQLStore) -> None:
    """Give the pages pruning freed back to the file system (SQLite ``VACUUM``: it rewrites
    the file and holds the write lock meanwhile; run it at a quiet time). PostgreSQL: nothing
    (autovacuum makes the space reusable; ``VACUUM FULL`` is the operator's call)."""
    if store.dialect == "sqlite":
        async with store._writing_one() as s:  # VACUUM runs outside any transaction
            await s.run("VACUUM")


async def payloads(store: SQLStore, run_ids: Sequence[str]) -> dict[str, int]:
    """Bytes of each run's event data as stored (what pruning it frees, give or take pages)."""
    if not run_ids:
        return {}
    async with store._reading() as s:
        rows = await s.all(
            q(
                store,
                "SELECT r.run_id, COALESCE(SUM(LENGTH(e.data)), 0) FROM runs r "
                f"JOIN events e ON e.run_no = r.run_no WHERE r.run_id IN ({_marks(len(run_ids))}) "
                "GROUP BY r.run_id",
            ),
            list(run_ids),
        )
    return {r[0]: int(r[1]) for r in rows}
