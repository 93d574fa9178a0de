"""Importing runs from the export format, and copying a whole store through it.

Import checks the whole file before it writes: the header's format, every record's fields,
the end line's counts (a file cut short is refused), each run's events numbered from 1 with
no gap, every event decoded by this code's event codec (a problem names the file and line),
and a log that folds folding to the status its row claims (one that does not fold, a damaged
run in a bug report, moves as it is). A run id that exists is refused, unless the caller
asks for new ids or to leave those runs as they are. Each run is written in one transaction,
so a crash during an import leaves whole runs or none of a run.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stead import _crash
from stead.core import transfer
from stead.core.event_codec import decode
from stead.core.events import Event, RunCreated
from stead.core.fold import fold
from stead.errors import Conflict, IllegalTransition, ImportFileError
from stead.store.lifecycle._transfer import _LEDGER_COLUMNS, atomic, export_lines, q, select_runs
from stead.store.sql import PACK_AT, Duplicate, SQLStore, dumps, pack_data

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
