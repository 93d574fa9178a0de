"""What PostgreSQL's store and its execution ledger half share: a session on one pooled
connection, and the names of the notice channels both listen on."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from stead.errors import StoreError
from stead.store.sql import Row

Conn = psycopg.AsyncConnection[tuple[Any, ...]]

LINGER = 5.0
"""Seconds a channel stays listened to after its last waiter left."""

LOOK_EVERY = 1.0
"""Seconds between looks at whether the server has gone, while a call waits for a connection."""


@contextlib.asynccontextmanager
async def pooled(
    pool: AsyncConnectionPool[Conn],
    wait_s: float,
    gone: Callable[[AsyncConnectionPool[Conn], bool], Awaitable[None]],
) -> AsyncIterator[Conn]:
    """``pool.connection(wait_s)``, awaiting ``gone(pool, True)`` each ``LOOK_EVERY`` s of a wait.

    A call that waits for a connection while the server is down (every connection was in
    use when it died, and the pool is reconnecting) would otherwise wait the pool's whole
    timeout, 30 s by default; ``gone`` probes the server and raises at once while it is
    down. A connection free at once is taken without a timer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        try:
            conn = await pool.getconn(timeout=max(0.0, min(LOOK_EVERY, deadline - loop.time())))
            break
        except PoolTimeout:
            if loop.time() >= deadline:
                raise
            await gone(pool, True)
    try:
        async with conn:
            yield conn
    finally:
        await pool.putconn(conn)


def channel(schema: str, key: str) -> str:
    """A notice channel, per schema (two deployments in one database do not wake each
    other) and key; a digest, because channel names stop at 63 bytes."""
    return "stead_" + hashlib.sha256(f"{schema}\0{key}".encode()).hexdigest()[:32]


class PgSession:
    """The shared code's ``Session`` on one pooled connection (autocommit)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Conn) -> None:
        self._conn = conn

    async def all(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        cur = await self._conn.execute(query, params)
        return await cur.fetchall()

    async def one(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        cur = await self._conn.execute(query, params)
        return await cur.fetchone()

    async def run(self, query: str, params: Sequence[Any] = ()) -> int:
        cur = await self._conn.execute(query, params)
        return cur.rowcount


def network_options(seconds: float) -> dict[str, Any]:
    """libpq's options bounding a connection at this end (seconds, whole; ms for the user
    timeout): connecting, unanswered bytes, and an idle connection's silence (keepalives:
    probed after ``seconds``, every second, given up after three unanswered probes)."""
    whole = max(1, round(seconds))
    return {
        "connect_timeout": whole,
        "tcp_user_timeout": int(seconds * 1000),
        "keepalives": 1,
        "keepalives_idle": whole,
        "keepalives_interval": 1,
        "keepalives_count": 3,
    }


_MIGRATION_LOCK = 0x5374656164  # "Stead": one migrator at a time, across processes


def session_settings(**ms: int) -> sql.Composed:
    """The ``SET`` statements of a new connection's settings (in milliseconds) as one query:
    no parameters, so the simple protocol takes them all in one round trip, not one each (a
    far server makes each one count)."""
    return sql.SQL("; ").join(
        sql.SQL("SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
        for name, value in ms.items()
    )


def migrate(
    url: str, where: str, timeout: float, apply: Callable[[Callable[..., Any]], None]
) -> str:
    """Apply the missing migrations (``apply`` runs them through the execute it is given) on a
    connection of its own, and return the schema they went into. Concurrent openers queue
    on an advisory lock, so exactly one applies each migration. ``StoreError`` naming the
    server on failure."""
    try:
        with (
            psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout))) as conn,
            conn.transaction(),
        ):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            row = conn.execute("SELECT current_schema()").fetchone()
            schema = row[0] if row else None
            if schema is None:
                raise StoreError(
                    f"no schema to create stead's tables in at {where}: the search_path "
                    "names no existing schema; create it or fix the URL"
                )
            apply(lambda q, p: conn.execute(q.encode(), p or None))
    except psycopg.Error as exc:
        raise StoreError(f"cannot open PostgreSQL store at {where}: {exc}") from exc
    return str(schema)


async def pipelined(conn: Conn, statements: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """``statements`` in one transaction, one round trip: BEGIN, them and COMMIT
    pipelined (not ``conn.transaction()``: in a pipeline it waits for BEGIN, and again
    for COMMIT; this is one Sync for all of it)."""
    try:
        async with conn.pipeline():
            await conn.execute("BEGIN")
            cursors = [await conn.execute(q, p) for q, p in statements]
            await conn.execute("COMMIT")
    except psycopg.Error:
        # A failed statement made the server skip the rest, COMMIT too.
        if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
        raise
    return cursors
