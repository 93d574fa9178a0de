"""Moving runs between stores: export to the versioned JSON Lines format, import from it,
and copying a whole store (``stead.core.transfer`` is the format; docs/lifecycle.md).

What goes with a run: its row, every event as stored (kind, version, the data's JSON), the
runs it was made from (``run_links``), the messages of its conversation that name it, the
blobs its messages refer to, and its execution-ledger rows. Not its snapshot (a cache: the
imported run folds its log) nor its lease (an imported run is nobody's; one that was being
driven is claimable, and its new owner takes it over as after a crash).

Import checks the whole file before it writes: the header's format, every record's fields,
the end line's counts (a file cut short is refused), each run's events numbered from 1 with
no gap, every event decoded by this code's event codec (a problem names the file and line),
and a log that folds folding to the status its row claims (one that does not fold, a damaged
run in a bug report, moves as it is). A run id that exists is
refused, unless the caller asks for new ids. Each run is written in one transaction, so a
crash during an import leaves whole runs or none of a run.
"""

from __future__ import annotations

import base64
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stead import _crash
from stead.core import transfer
from stead.core.event_codec import decode
from stead.core.events import Event, RunCreated
from stead.core.fold import fold
from stead.errors import Conflict, IllegalTransition, ImportFileError, RunNotFound, UserError
from stead.store.sql import PACK_AT, Duplicate, SQLStore, decode_row, dumps, pack_data, unpack_data

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
    import json

    value = json.loads(text)
    assert isinstance(value, dict)
    return value


# -- writing ------------------------------------------------------------------------------


@dataclass
class _Run:
    record: dict[str, Any]
    line: int
    events: list[tuple[int, dict[str, Any], Event]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Imported:
    """What an import wrote."""

    runs: dict[str, str]
    """Each run written, by its id in the file, and the id it has now (the same unless new
    ids were asked for)."""
    events: int
    blobs: int
    skipped: list[str] = field(default_factory=list)
    """Runs of the file the store held already, left as they were (``skip_existing``)."""


@dataclass
class Parsed:
    """An import file read and checked, nothing written yet."""

    name: str
    runs: dict[str, _Run]
    orphans: list[dict[str, Any]]
    """Conversation messages whose run is not in the file (a message whose run was never
    made, or ``stead store copy``'s whole table)."""
    blobs: list[dict[str, Any]]
    effects: list[dict[str, Any]]
    effect_events: list[dict[str, Any]]


def parse(name: str, lines: Iterable[str]) -> Parsed:
    """Read and check a whole file (see the module docstring); ``ImportFileError`` names
    the file and line of the first problem."""
    runs: dict[str, _Run] = {}
    out = Parsed(name=name, runs=runs, orphans=[], blobs=[], effects=[], effect_events=[])
    ended = False
    number = 0
    records = 0
    for number, text in enumerate(lines, 1):
        text = text.rstrip("\n")
        if number == 1:
            try:
                transfer.read_header(text)
            except ValueError as exc:
                raise ImportFileError(name, 1, str(exc)) from None
            continue
        if ended:
            raise ImportFileError(name, number, "a line after the end record")
        try:
            record = transfer.read_line(text)
        except ValueError as exc:
            raise ImportFileError(name, number, str(exc)) from None
        kind = record.pop("type")
        if kind == "end":
            if (record["runs"], record["records"]) != (len(runs), records):
                raise ImportFileError(
                    name,
                    number,
                    f"the end record counts {record['runs']} runs and {record['records']} "
                    f"records, the file holds {len(runs)} and {records}",
                )
            ended = True
            continue
        records += 1
        _take(out, kind, record, number)
    if number == 0:
        raise ImportFileError(name, 1, "the file is empty")
    if not ended:
        raise ImportFileError(name, number, "the file ends without its end record (cut short?)")
    for run in runs.values():
        _check_run(name, run)
    return out


def _take(out: Parsed, kind: str, record: dict[str, Any], number: int) -> None:
    name = out.name
    if kind == "run":
        if record["run_id"] in out.runs:
            raise ImportFileError(name, number, f"run {record['run_id']!r} appears twice")
        out.runs[record["run_id"]] = _Run(record=record, line=number)
        return
    if kind in ("event", "link"):
        run = out.runs.get(record["run_id"])
        if run is None:
            raise ImportFileError(
                name, number, f"{kind} of run {record['run_id']!r} before its run record"
            )
        if kind == "link":
            run.links.append(record)
            return
        expected = len(run.events) + 1
        if record["seq"] != expected:
            raise ImportFileError(name, number, f"event seq {record['seq']}, expected {expected}")
        try:
            event = decode(record["kind"], record["version"], record["data"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ImportFileError(
                name, number, f"event {record['kind']} does not decode: {exc}"
            ) from None
        run.events.append((number, record, event))
    elif kind == "message":
        run = out.runs.get(record["run_id"])
        (run.messages if run is not None else out.orphans).append(record)
    elif kind == "blob":
        try:
            base64.b64decode(record["data"], validate=True)
        except ValueError as exc:
            raise ImportFileError(name, number, f"blob data is not base64 ({exc})") from None
        out.blobs.append(record)
    elif kind == "effect":
        out.effects.append(record)
    elif kind == "effect_event":
        out.effect_events.append(record)


def _check_run(name: str, run: _Run) -> None:
    rid = run.record["run_id"]
    if len(run.events) != run.record["last_seq"]:
        raise ImportFileError(
            name,
            run.line,
            f"run {rid!r} is at seq {run.record['last_seq']} but {len(run.events)} events "
            "follow it",
        )
    first = run.events[0][2] if run.events else None
    if not isinstance(first, RunCreated) or first.run_id != rid:
        raise ImportFileError(
            name, run.line, f"run {rid!r} does not begin with its own run_created"
        )
    try:
        state = fold(e for _, _, e in run.events)
    except IllegalTransition:
        # A log that does not fold (a damaged run in a bug report) moves as it is: it is
        # refused where it is driven or shown, as it was in the store it came from.
        return
    status = state.status.value if state.status is not None else None
    if status != run.record["status"]:
        raise ImportFileError(
            name,
            run.line,
            f"run {rid!r} says it is {run.record['status']} but its log folds to {status}",
        )


async def write(
    store: SQLStore,
    parsed: Parsed,
    *,
    new_ids: bool = False,
    skip_existing: bool = False,
    now: float,
) -> Imported:
    """Write a parsed file into ``store``: blobs, then each run (its row, events, links and
    messages) in a transaction of its own, then ledger rows. A run id the store holds is a
    ``Conflict`` (nothing of the file written) unless ``new_ids``: then every run gets a
    fresh id, and its conversation a fresh id too (references inside the file follow;
    ledger rows are left behind, their keys derive from the old id, and an in-flight effect
    is found missing by the new owner, which recovers it as after a crash); or unless
    ``skip_existing``: then those runs are left as they are (finishing an import a crash
    cut short) and listed in ``Imported.skipped``."""
    ids = {rid: (f"run_{uuid.uuid4().hex}" if new_ids else rid) for rid in parsed.runs}
    sessions: dict[str, str] = {}
    skipped: list[str] = []
    if new_ids:
        for run in parsed.runs.values():
            sid = run.record["session_id"]
            if sid and sid not in sessions:
                sessions[sid] = f"{sid}-{uuid.uuid4().hex[:8]}"
    else:
        async with store._reading() as s:
            for rid in parsed.runs:
                if await s.one(q(store, "SELECT 1 FROM runs WHERE run_id = ?"), (rid,)) is None:
                    continue
                if not skip_existing:
                    raise Conflict(
                        f"run {rid!r} already exists in this store; import it under a new id "
                        "(--new-ids), leave the runs that exist as they are (--skip-existing), "
                        "or remove it first"
                    )
                skipped.append(rid)
    blobs = 0
    async with atomic(store) as s:
        for b in parsed.blobs:
            blobs += await s.run(
                q(
                    store,
                    "INSERT INTO blobs (digest, media_type, data, created_at) VALUES "
                    "(?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING",
                ),
                (b["digest"], b["media_type"], base64.b64decode(b["data"]), b["created_at"]),
            )
    events = 0
    for rid, run in parsed.runs.items():
        if rid not in skipped:
            events += await _write_run(store, run, ids, sessions)
    if parsed.orphans:
        async with atomic(store) as s:
            for m in parsed.orphans:
                await _put_message(store, s, m, ids, sessions, again_ok=True)
    if not new_ids:
        async with atomic(store) as s:
            for k in parsed.effects:
                cols = transfer.RECORDS["effect"]
                await s.run(
                    q(
                        store,
                        f"INSERT INTO ledger_keys ({_LEDGER_COLUMNS}) VALUES "
                        f"({', '.join('?' * len(cols))}) ON CONFLICT (effect_id) DO NOTHING",
                    ),
                    [k[c] for c in cols],
                )
            for ev in parsed.effect_events:
                await s.run(
                    q(
                        store,
                        "INSERT INTO ledger_events (effect_id, seq, kind, data, created_at) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (effect_id, seq) DO NOTHING",
                    ),
                    (ev["effect_id"], ev["seq"], ev["kind"], ev["data"], ev["created_at"]),
                )
    written = {old: new for old, new in ids.items() if old not in skipped}
    return Imported(runs=written, events=events, blobs=blobs, skipped=skipped)


async def _write_run(
    store: SQLStore, run: _Run, ids: dict[str, str], sessions: dict[str, str]
) -> int:
    r = run.record
    rid = ids[r["run_id"]]
    epoch = max((getattr(e, "epoch", 0) for _, _, e in run.events), default=0)
    rows = []
    for _, rec, _ in run.events:
        data = rec["data"]
        if rec["seq"] == 1 and ids[r["run_id"]] != r["run_id"]:
            data = dict(data, run_id=rid)
            if data.get("history_from"):
                data["history_from"] = ids.get(data["history_from"], data["history_from"])
            if data.get("session_id"):
                data["session_id"] = sessions.get(data["session_id"], data["session_id"])
        rows.append(
            event_params(
                store, rid, rec["seq"], rec["kind"], rec["version"], data, rec["created_at"]
            )
        )
    try:
        async with atomic(store) as s:
            await s.run(
                q(
                    store,
                    "INSERT INTO runs (run_id, agent, session_id, correlation_id, status, "
                    "last_seq, epoch, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ),
                (
                    rid,
                    r["agent"],
                    sessions.get(r["session_id"], r["session_id"]),
                    r["correlation_id"],
                    r["status"],
                    r["last_seq"],
                    epoch,
                    r["created_at"],
                    r["updated_at"],
                ),
            )
            for params in rows:
                await s.run(q(store, INSERT_EVENT), params)
            for link in run.links:
                await s.run(
                    q(store, "INSERT INTO run_links (run_id, source_id, kind) VALUES (?, ?, ?)"),
                    (rid, ids.get(link["source_id"], link["source_id"]), link["kind"]),
                )
            for m in run.messages:
                await _put_message(store, s, m, ids, sessions)
            _crash.point("before_import_commit")
    except Duplicate as exc:
        raise Conflict(
            f"run {rid!r} (or its conversation's message) already exists: {exc}"
        ) from exc
    return len(rows)


INSERT_EVENT = (
    "INSERT INTO events (run_no, run_id, seq, kind, version, turn_index, tool_call_id, data, "
    "created_at) VALUES ((SELECT run_no FROM runs WHERE run_id = ?), ?, ?, ?, ?, ?, ?, ?, ?)"
)


def event_params(
    store: SQLStore,
    rid: str,
    seq: int,
    kind: str,
    version: int,
    data: dict[str, Any],
    created: float,
) -> tuple[Any, ...]:
    """``INSERT_EVENT``'s parameters for one event, its data stored as the append stores it
    (compact JSON, compressed when long; bytes where the dialect keeps bytes)."""
    text = dumps(data)
    stored: str | bytes = text if len(text) < PACK_AT else pack_data(text)
    if store.BYTES_DATA and isinstance(stored, str):
        stored = stored.encode("utf-8")
    turn = data.get("turn_index")
    call = data.get("tool_call_id")
    return (
        rid,
        rid,
        seq,
        kind,
        version,
        turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
        call if isinstance(call, str) else None,
        stored,
        created,
    )


async def _put_message(
    store: SQLStore,
    s: Any,
    m: dict[str, Any],
    ids: dict[str, str],
    sessions: dict[str, str],
    *,
    again_ok: bool = False,
) -> None:
    tail = " ON CONFLICT DO NOTHING" if again_ok else ""
    await s.run(
        q(
            store,
            "INSERT INTO conversation_messages (conversation_id, position, message_id, "
            "run_id, agent, input, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)" + tail,
        ),
        (
            sessions.get(m["conversation_id"], m["conversation_id"]),
            m["position"],
            m["message_id"],
            ids.get(m["run_id"], m["run_id"]),
            m["agent"],
            dumps(m["input"]),
            m["created_at"],
        ),
    )


# -- a whole store ------------------------------------------------------------------------


async def copy_store(source: SQLStore, target: SQLStore, *, now: float) -> Imported:
    """Every run, conversation, blob and ledger row of ``source`` into ``target`` (which must
    hold none of its run ids): the export and import paths, so a copy is checked exactly as
    an import is."""
    run_ids = await select_runs(source)
    lines = [line async for line in export_lines(source, run_ids, whole_store=True)]
    return await write(target, parse("(copy)", lines), now=now)
