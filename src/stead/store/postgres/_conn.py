"""What PostgreSQL's store and its execution ledger half share: a session on one pooled
connection, and the names of the notice channels both listen on."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import psycopg

from stead.store.sql import Row

Conn = psycopg.AsyncConnection[tuple[Any, ...]]

LINGER = 5.0
"""Seconds a channel stays listened to after its last waiter left."""


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
