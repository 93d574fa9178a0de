"""Exporting runs to the versioned JSON Lines format (``stead.core.transfer`` is the format;
docs/lifecycle.md), and what the lifecycle modules share: a transaction of several
statements on either dialect, the dialect's placeholders.

What goes with a run: its row, every event as stored (kind, version, the data's JSON), the
runs it was made from (``run_links``), the messages of its conversation that name it, the
blobs its messages refer to, and its execution-ledger rows. Not its snapshot (a cache: the
imported run folds its log) nor its lease (an imported run is nobody's; one that was being
driven is claimable, and its new owner takes it over as after a crash).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from stead.core import transfer
from stead.core.events import RunCreated
from stead.errors import RunNotFound, UserError
from stead.store.sql import SQLStore, decode_row, unpack_data

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
"""How an attachment's blob is named wherever a message refers to it."""


def sql_store(store: Any) -> SQLStore:
    """The store as the SQL base both backends share, or a ``UserError``."""
    if not isinstance(store, SQLStore):
        raise UserError(
            f"moving runs needs a SQLite or PostgreSQL store, not {type(store).__name__}"
        )
    return store


def q(store: SQLStore, sql: str) -> str:
    """``sql`` with the dialect's placeholder."""
    return sql.replace("?", store.PARAM)


@contextlib.asynccontextmanager
async def atomic(store: SQLStore) -> AsyncIterator[Any]:
    """One transaction of several statements on either dialect (PostgreSQL's sessions are
    autocommitted, so the shared ``_writing`` is not one there). SQLite's holds the store's
    write lock: nothing inside may wait on another write of the same store."""
    if store.dialect == "postgres":
        async with store._conn() as conn, conn.transaction():  # type: ignore[attr-defined]
            yield _PgTx(conn)
    else:
        async with store._writing() as s:
            yield s


class _PgTx:
    """The shared ``Session`` shape on a PostgreSQL connection inside a transaction."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def all(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = await self._conn.execute(query, params)
        rows: list[tuple[Any, ...]] = await cur.fetchall()
        return rows

    async def one(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        cur = await self._conn.execute(query, params)
        row: tuple[Any, ...] | None = await cur.fetchone()
        return row

    async def run(self, query: str, params: Sequence[Any] = ()) -> int:
        cur = await self._conn.execute(query, params)
        return int(cur.rowcount)


# -- reading ------------------------------------------------------------------------------

_RUN = (
    "SELECT run_id, agent, session_id, correlation_id, status, last_seq, created_at, updated_at "
    "FROM runs WHERE run_id = ?"
)
_EVENTS = (
    "SELECT e.seq, e.kind, e.version, e.data, e.created_at FROM events e "
    "WHERE e.run_no = (SELECT run_no FROM runs WHERE run_id = ?) AND e.seq <= ? ORDER BY e.seq"
)
_LEDGER_COLUMNS = ", ".join(transfer.RECORDS["effect"])


async def select_runs(
    store: SQLStore,
    *,
    run_ids: Sequence[str] = (),
    conversation: str | None = None,
    since: float | None = None,
    agent: str | None = None,
) -> list[str]:
    """The runs an export takes: those named, a conversation's, or every run created since
    a time and/or of an agent (all of them when nothing narrows it); each with the runs its
    history is read from (``history_from``, transitively), so the file stands on its own.
    In creation order."""
    found: set[str] = set()
    async with store._reading() as s:
        for rid in run_ids:
            if await s.one(q(store, "SELECT 1 FROM runs WHERE run_id = ?"), (rid,)) is None:
                raise RunNotFound(rid)
            found.add(rid)
        if conversation is not None:
            rows = await s.all(
                q(store, "SELECT run_id FROM runs WHERE session_id = ?"), (conversation,)
            )
            if not rows:
                raise UserError(f"no run belongs to conversation {conversation!r}")
            found.update(r[0] for r in rows)
        if not run_ids and conversation is None:
            where: list[str] = []
            params: list[Any] = []
            if since is not None:
                where.append("created_at >= ?")
                params.append(since)
            if agent is not None:
                where.append("agent = ?")
                params.append(agent)
            sql = "SELECT run_id FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
            found.update(r[0] for r in await s.all(q(store, sql), params))
    todo = list(found)
    while todo:  # the runs a conversation's history is read from
        created = await _created(store, todo.pop())
        before = created.history_from if created is not None else ""
        if before and before not in found:
            found.add(before)
            todo.append(before)
    async with store._reading() as s:
        marks = ", ".join("?" * len(found))
        rows = (
            await s.all(
                q(store, f"SELECT run_id, created_at FROM runs WHERE run_id IN ({marks})"),
                sorted(found),
            )
            if found
            else []
        )
    return [r[0] for r in sorted(rows, key=lambda r: (r[1], r[0]))]


async def _created(store: SQLStore, run_id: str) -> RunCreated | None:
    async with store._reading() as s:
        row = await s.one(
            q(
                store,
                "SELECT e.kind, e.version, e.data FROM events e WHERE e.run_no = "
                "(SELECT run_no FROM runs WHERE run_id = ?) AND e.seq = 1",
            ),
            (run_id,),
        )
    if row is None:
        return None
    event = decode_row(run_id, 1, row[0], row[1], _bytes_or_text(row[2]))
    return event if isinstance(event, RunCreated) else None


def _bytes_or_text(data: Any) -> str | bytes:
    if isinstance(data, memoryview | bytearray):
        return bytes(data)
    assert isinstance(data, str | bytes)
    return data


def _text(data: Any) -> str:
    raw = unpack_data(_bytes_or_text(data))
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


async def export_lines(
    store: SQLStore, run_ids: Sequence[str], *, whole_store: bool = False
) -> AsyncIterator[str]:
    """The export of ``run_ids`` (``select_runs``), line by line, each with its newline.
    ``whole_store``: also every conversation message, blob and ledger row, whoever they
    name (``stead store copy``)."""
    yield transfer.header() + "\n"
    runs = [0]
    records = 0
    async for text in _records(store, run_ids, whole_store, runs):
        records += 1
        yield text
    yield transfer.line("end", runs=runs[0], records=records) + "\n"


async def _records(
    store: SQLStore, run_ids: Sequence[str], whole_store: bool, runs: list[int]
) -> AsyncIterator[str]:
    digests: set[str] = set()
    for rid in run_ids:
        async with store._reading() as s:
            row = await s.one(q(store, _RUN), (rid,))
            if row is None:
                continue  # pruned since it was selected
            run_fields = transfer.RECORDS["run"]
            yield transfer.line("run", **dict(zip(run_fields, row, strict=True))) + "\n"
            events = await s.all(q(store, _EVENTS), (rid, row[5]))
            links = await s.all(
                q(
                    store,
                    "SELECT run_id, source_id, kind FROM run_links WHERE run_id = ? "
                    "ORDER BY source_id",
                ),
                (rid,),
            )
        runs[0] += 1
        for seq, kind, version, data, created in events:
            decode_row(rid, seq, kind, version, _bytes_or_text(data))  # a damaged row stops here
            text = _text(data)
            digests.update(_DIGEST.findall(text))
            yield (
                transfer.line(
                    "event",
                    run_id=rid,
                    seq=seq,
                    kind=kind,
                    version=version,
                    created_at=created,
                    data=_object(text),
                )
                + "\n"
            )
        for link in links:
            yield transfer.line("link", run_id=link[0], source_id=link[1], kind=link[2]) + "\n"
    cols = ", ".join(transfer.RECORDS["message"])
    async with store._reading() as s:
        if whole_store:
            messages = await s.all(f"SELECT {cols} FROM conversation_messages")
        else:  # by the run (its unique index)
            messages = []
            for rid in run_ids:
                messages += await s.all(
                    q(store, f"SELECT {cols} FROM conversation_messages WHERE run_id = ?"), (rid,)
                )
    for m in sorted(messages, key=lambda m: (m[0], m[1])):
        digests.update(_DIGEST.findall(m[5]))
        fields = dict(zip(transfer.RECORDS["message"], m, strict=True))
        fields["input"] = _object(m[5])
        yield transfer.line("message", **fields) + "\n"
    async with store._reading() as s:
        if whole_store:
            blobs = await s.all(
                "SELECT digest, media_type, created_at, data FROM blobs ORDER BY digest"
            )
        elif digests:
            marks = ", ".join("?" * len(digests))
            blobs = await s.all(
                q(
                    store,
                    f"SELECT digest, media_type, created_at, data FROM blobs "
                    f"WHERE digest IN ({marks}) ORDER BY digest",
                ),
                sorted(digests),
            )
        else:
            blobs = []
    for digest, media_type, created, data in blobs:
        yield (
            transfer.line(
                "blob",
                digest=digest,
                media_type=media_type,
                created_at=created,
                data=base64.b64encode(bytes(data)).decode("ascii"),
            )
            + "\n"
        )
    ledger_events = "SELECT effect_id, seq, kind, data, created_at FROM ledger_events"
    async with store._reading() as s:
        if whole_store:
            keys = await s.all(f"SELECT {_LEDGER_COLUMNS} FROM ledger_keys")
            effect_events = await s.all(ledger_events)
        else:  # by the run (index ledger_keys_by_run), then by each key
            keys, effect_events = [], []
            for rid in run_ids:
                keys += await s.all(
                    q(store, f"SELECT {_LEDGER_COLUMNS} FROM ledger_keys WHERE run_id = ?"),
                    (rid,),
                )
            for k in keys:
                effect_events += await s.all(
                    q(store, f"{ledger_events} WHERE effect_id = ?"), (k[0],)
                )
    effect_fields = transfer.RECORDS["effect"]
    for k in sorted(keys, key=lambda k: k[0]):
        yield transfer.line("effect", **dict(zip(effect_fields, k, strict=True))) + "\n"
    for ev in sorted(effect_events, key=lambda e: (e[0], e[1])):
        fields = dict(zip(transfer.RECORDS["effect_event"], ev, strict=True))
        fields["data"] = _text(ev[3])
        yield transfer.line("effect_event", **fields) + "\n"


def _object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value
