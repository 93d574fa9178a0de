"""PostgreSQL's snapshots in pieces: the long lists of a state written once, not every time.

A snapshot holds the whole state, and a long run's state is mostly its conversation. Written
whole every ``snapshot_every`` events, a run of N turns writes O(N²) bytes of snapshots; on
PostgreSQL each rewrite also leaves the previous version (its TOAST chunks) dead in the table
until a vacuum: a run of 1,000 tool turns of 1 KB left 1.7 MB of old snapshots behind a
0.25 MB live one, more than its whole event log. An update cannot be made in place (TOAST
values are never overwritten; HOT updates spare only the heap tuple and its index entries),
so the fix is to write less.

Here a state's long lists (its ``messages``, its ``turn_usage``) are cut into pieces of
``PIECE`` items from the start; each full piece is stored once in ``snapshot_chunks``
(migration 0009) under the sha256 of its JSON, and the snapshot row keeps the rest: the
state with those lists cut to the items after the last full piece, and ``chunks``, the
digests of the pieces that come before, per list. A later snapshot of the same run finds
its earlier pieces already stored (a state's lists only grow) and writes only the new ones,
so the bytes a run's snapshots write are about its content once, and what a rewrite leaves
dead is the small remainder. A state whose lists are shorter than a piece is written as
before, whole.

A snapshot row with ``chunks`` is not a state by itself: the core refuses a state with an
unknown field, so a reader that does not put the pieces back (``SQLStore.load``, an older
stead) folds the log instead, as for any snapshot it cannot use. The pieces are written in
their own unsynced statement before the append that writes the row: WAL is one sequence, so
the append's commit makes them durable too; a missing or damaged piece (one removed by hand)
makes the snapshot unusable, never wrong, each piece being checked against its digest.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from typing import Any

from stead.store.postgres._append import UNSYNCED
from stead.store.sql import dumps

PIECE = 32
"""Items of a list a piece holds. A rewrite leaves at most a piece's worth of each list dead
(about 4 KiB compressed for 32 tool turns of 1 KB); a smaller piece costs more rows."""

LISTS = ("messages", "turn_usage")
"""The state's lists that grow with its turns (the others stay a few items long)."""

Pieces = list[tuple[str, bytes]]
"""(digest, JSON) of each full piece."""


def split(state: dict[str, Any]) -> tuple[dict[str, Any], Pieces]:
    """(the snapshot row's state, the pieces it refers to); the state itself and no pieces
    when no list is a piece long."""
    chunks: dict[str, list[str]] = {}
    pieces: Pieces = []
    head = state
    for key in LISTS:
        items = state.get(key)
        if not isinstance(items, list) or len(items) < PIECE:
            continue
        full = len(items) - len(items) % PIECE
        digests = []
        for i in range(0, full, PIECE):
            text = dumps(items[i : i + PIECE]).encode("utf-8")
            digest = hashlib.sha256(text).hexdigest()
            digests.append(digest)
            pieces.append((digest, text))
        if head is state:
            head = dict(state)
        head[key] = items[full:]
        chunks[key] = digests
    if chunks:
        head["chunks"] = chunks
    return head, pieces


def digests(head: dict[str, Any]) -> list[str] | None:
    """Every piece a snapshot row refers to, in order; None when it refers to none, or its
    ``chunks`` is not what ``split`` writes (the row is then refused like any damaged one)."""
    chunks = head.get("chunks")
    if chunks is None:
        return None
    if not isinstance(chunks, dict):
        return []
    out: list[str] = []
    for key, ds in chunks.items():
        if key not in LISTS or not isinstance(ds, list):
            return []
        out.extend(d for d in ds if isinstance(d, str))
    return out


def joined(head: dict[str, Any], stored: Sequence[tuple[str, bytes]]) -> dict[str, Any] | None:
    """The whole state from a snapshot row and its stored pieces ((digest, zlib data)); None
    when a piece is missing or is not the one its digest names."""
    found: dict[str, list[Any]] = {}
    for digest, data in stored:
        try:
            text = zlib.decompress(bytes(data))
            items = json.loads(text)
        except (ValueError, zlib.error):
            return None
        if hashlib.sha256(text).hexdigest() != digest or not isinstance(items, list):
            return None
        found[digest] = items
    state = {k: v for k, v in head.items() if k != "chunks"}
    for key, ds in head["chunks"].items():
        tail = state.get(key)
        if not isinstance(tail, list) or any(d not in found for d in ds):
            return None
        state[key] = [item for d in ds for item in found[d]] + tail
    return state


KNOWN = "SELECT digest FROM snapshot_chunks WHERE run_id = %s AND digest = ANY(%s)"
WRITE = (
    "INSERT INTO snapshot_chunks (run_id, digest, data)"
    " SELECT %s, d, p FROM unnest(%s::text[], %s::bytea[]) AS u(d, p)"
    f" ON CONFLICT DO NOTHING RETURNING {UNSYNCED}"
)
"""Unsynced: durable with the append after it (the module docstring says why)."""


async def write(conn: Any, run_id: str, pieces: Pieces) -> None:
    """Store the pieces of ``run_id`` not stored yet (compressed: zlib level 1, as ``pack``).
    Two round trips once a snapshot, so that a piece already stored is neither compressed
    nor sent again."""
    cur = await conn.execute(KNOWN, (run_id, [d for d, _ in pieces]))
    known = {r[0] for r in await cur.fetchall()}
    new = [(d, t) for d, t in pieces if d not in known]
    if new:
        datas = [zlib.compress(t, 1) for _, t in new]
        await conn.execute(WRITE, (run_id, [d for d, _ in new], datas))


def put_back(
    snapshot: dict[str, Any], stored: Sequence[tuple[str, bytes]]
) -> dict[str, Any] | None:
    """The whole state of a snapshot row, given the run's stored pieces ((digest, data), any
    order, unreferenced ones too); the row itself when it refers to none; None when its
    pieces cannot be put back (the caller then reads the run the shared way, whose state
    the core refuses, and folds the log)."""
    ds = digests(snapshot)
    if ds is None:
        return snapshot
    wanted = set(ds)
    return joined(snapshot, [p for p in stored if p[0] in wanted]) if wanted else None
