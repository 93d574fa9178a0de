"""Finding runs: pages of runs by status, agent, creation time and text, in the database
(migration 0011), for both dialects; and the runs whose id starts with a text.

Text finds a run by its id (a prefix), its conversation (the whole id), or a word of its
input or output: ``run_search`` holds each run's input and output lowercased, one row a run,
derived from the log by the runtime (``Runtime.find_runs`` brings the stale rows up to date
first: ``stale_search_rows``, ``put_search_rows``). No append writes it.

A start of an id is a range of the ids index (``run_ids_starting``): every id that starts
with ``p`` lies in ``[p, after(p))`` in byte order, and nothing else does, so a person's
typed start costs a few index entries however many runs the store holds. Byte order is
SQLite's (``BINARY``) and PostgreSQL's where the database sorts text as C does; elsewhere
(a language's collation, which may sort ``ab_c`` beside ``abc``) PostgreSQL reads the range
from an index in the C collation (migration 0012).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from stead.store.sql._base import RunRecord

_RUN_COLUMNS = (
    "r.run_id, r.agent, r.session_id, r.correlation_id, r.status, r.last_seq, r.epoch, "
    "r.lease_owner, r.lease_expires_at, r.created_at, r.updated_at"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """Which runs a page holds; every field left at its default matches every run."""

    status: str | None = None
    agent: str | None = None
    text: str = ""
    """A run id prefix, a conversation id, or words of the input or output (each word must
    be in it, case aside)."""
    created_from: float | None = None
    """Runs created at or after this time (seconds since the epoch)."""
    created_until: float | None = None
    """Runs created before this time."""
    before: tuple[float, str] | None = None
    """The (updated_at, run_id) of the previous page's last run: the page after it."""
    limit: int = 50


@runtime_checkable
class RunSearch(Protocol):
    """A store that can find runs (both SQL stores)."""

    async def find_runs(self, query: RunQuery) -> list[RunRecord]:
        """The runs ``query`` matches, most recently updated first."""
        ...

    async def stale_search_rows(self, limit: int) -> list[tuple[str, float]]:
        """(run_id, updated_at) of runs whose ``run_search`` row is missing or older than
        the run (at most ``limit``)."""
        ...

    async def put_search_rows(self, rows: Sequence[tuple[str, float, str]]) -> None:
        """Write (run_id, the run's updated_at, its text) rows of ``run_search``."""
        ...


def after(prefix: str) -> str | None:
    """The least text greater than every text that starts with ``prefix``, in code point
    order (UTF-8's byte order); None when there is none (every character is the last code
    point). Surrogates are no characters of UTF-8, so ``U+D7FF`` is followed by ``U+E000``."""
    chars = list(prefix)
    while chars:
        point = ord(chars.pop()) + 1
        if point <= 0x10FFFF:
            return "".join(chars) + chr(0xE000 if 0xD800 <= point <= 0xDFFF else point)
    return None


def _like(word: str) -> str:
    """``word`` as a LIKE pattern's literal part (``\\`` escapes)."""
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class SearchRows:
    """``RunSearch`` over the shared SQL session (mixed into both SQL stores)."""

    PARAM: ClassVar[str]

    def _reading(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def _writing(self, *, sync: bool = True) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    async def find_runs(self, query: RunQuery) -> list[RunRecord]:
        """See ``RunSearch.find_runs``."""
        where: list[str] = []
        params: list[Any] = []
        if query.status is not None:
            where.append("r.status = ?")
            params.append(query.status)
        if query.agent is not None:
            where.append("r.agent = ?")
            params.append(query.agent)
        if query.created_from is not None:
            where.append("r.created_at >= ?")
            params.append(query.created_from)
        if query.created_until is not None:
            where.append("r.created_at < ?")
            params.append(query.created_until)
        if query.before is not None:
            where.append("(r.updated_at < ? OR (r.updated_at = ? AND r.run_id < ?))")
            params += [query.before[0], query.before[0], query.before[1]]
        text = query.text.strip()
        if text:
            words = text.lower().split()
            contains = " AND ".join("s.text LIKE ? ESCAPE '\\'" for _ in words)
            where.append(
                "(r.run_id LIKE ? ESCAPE '\\' OR r.session_id = ? OR EXISTS "
                f"(SELECT 1 FROM run_search s WHERE s.run_id = r.run_id AND {contains}))"
            )
            params += [_like(text) + "%", text, *(f"%{_like(w)}%" for w in words)]
        sql = (
            f"SELECT {_RUN_COLUMNS} FROM runs r"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " ORDER BY r.updated_at DESC, r.run_id DESC LIMIT ?"
        )
        params.append(query.limit)
        async with self._reading() as s:
            rows = await s.all(sql.replace("?", self.PARAM), params)
        return [_record(r) for r in rows]

    IDS_BY_BYTES: ClassVar[tuple[str, str] | None] = None
    """Where the ids index may not be in byte order (PostgreSQL: migration 0012): the ids
    in byte order, as an index of them reads them, and a statement whose one value says
    whether that index is there. None: ``run_id`` is in byte order (SQLite's always is)."""
    _ids_by_bytes: bool | None = None
    """The statement's answer, once asked (a database's collation never changes)."""

    async def _id_in_byte_order(self, s: Any) -> str:
        """The expression that orders run ids bytewise by an index."""
        if self.IDS_BY_BYTES is None:
            return "run_id"
        if self._ids_by_bytes is None:
            row = await s.one(self.IDS_BY_BYTES[1], ())
            self._ids_by_bytes = bool(row and row[0])
        return self.IDS_BY_BYTES[0] if self._ids_by_bytes else "run_id"

    async def run_ids_starting(self, prefixes: Sequence[str], *, limit: int) -> list[str]:
        """See ``Store.run_ids_starting``."""
        parts: list[str] = []
        params: list[Any] = []
        async with self._reading() as s:
            column = await self._id_in_byte_order(s)
            for prefix in dict.fromkeys(prefixes):
                upper = after(prefix)
                where = f"{column} >= ?" + ("" if upper is None else f" AND {column} < ?")
                parts.append(
                    f"SELECT run_id FROM (SELECT run_id FROM runs WHERE {where} "
                    f"ORDER BY {column} LIMIT ?) AS p{len(parts)}"
                )
                params += [prefix, *(() if upper is None else (upper,)), limit]
            if not parts:
                return []
            rows = await s.all(" UNION ALL ".join(parts).replace("?", self.PARAM), params)
        return sorted({str(r[0]) for r in rows})[:limit]

    async def stale_search_rows(self, limit: int) -> list[tuple[str, float]]:
        """See ``RunSearch.stale_search_rows``."""
        sql = (
            "SELECT r.run_id, r.updated_at FROM runs r "
            "LEFT JOIN run_search s ON s.run_id = r.run_id "
            "WHERE s.run_id IS NULL OR s.updated_at <> r.updated_at LIMIT ?"
        )
        async with self._reading() as s:
            rows = await s.all(sql.replace("?", self.PARAM), (limit,))
        return [(str(r[0]), float(r[1])) for r in rows]

    async def put_search_rows(self, rows: Sequence[tuple[str, float, str]]) -> None:
        """See ``RunSearch.put_search_rows``."""
        sql = (
            "INSERT INTO run_search (run_id, updated_at, text) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET updated_at = excluded.updated_at, "
            "text = excluded.text"
        ).replace("?", self.PARAM)
        async with self._writing(sync=False) as s:
            for row in rows:
                await s.run(sql, row)


def _record(row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        agent=row[1],
        session_id=row[2],
        correlation_id=row[3],
        status=row[4],
        last_seq=row[5],
        epoch=row[6],
        lease_owner=row[7],
        lease_expires_at=row[8],
        created_at=row[9],
        updated_at=row[10],
    )
