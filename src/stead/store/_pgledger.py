"""The execution ledger's PostgreSQL half (``stead.store._ledger`` holds the rest).

Its writes run in an explicit transaction on a pooled connection (each is several
statements); a claim locks the rows it picks and skips those another executor is claiming
(``FOR UPDATE SKIP LOCKED``); a settle ``NOTIFY``-s its key and ledger position (never the
outcome) on the run's effects channel, and new work its queue's channel. A LISTEN connection of
its own (``stead.store._pglisten.Listener``) feeds the shared ``Watcher``: a notice wakes the
waiters on that key to re-read; a (re)connect wakes every waiter, since notices sent while it
was down are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import psycopg

from stead.errors import StoreError
from stead.store._ledger import _READ, Change, KeyRow, Ledger, _key_row, event_data
from stead.store._pglisten import Listener
from stead.store._sql import Session
from stead.store._watch import _until_set
from stead.store.postgres import PostgresStore, _channel, _Session


def _channel_sql(key: str) -> str:
    """``postgres._channel(schema, key)`` as SQL, the schema a parameter and ``key`` an
    expression of the updated row ``u``."""
    return (
        "'stead_' || left(encode(sha256(convert_to(?, 'UTF8') || '\\x00'::bytea || "
        f"convert_to({key}, 'UTF8')), 'hex'), 32)"
    )


_EFFECTS = _channel_sql("'effects:' || run_id")
_QUEUE = _channel_sql("'queue:' || queue")
_NOTICES = {
    "settled": f", pg_notify({_EFFECTS}, ? || ':' || position)",
    "restarted": f", pg_notify({_QUEUE}, left(?, 0))",
}
"""What a one-statement transition notifies, by its event's kind (the last parameter is
the effect id: the settle's payload is ``effect_id:position``, never the outcome)."""


class PostgresLedger(Ledger):
    """PostgreSQL: an explicit transaction; claims skip each other's locked rows; settles
    and new work are notified (a second LISTEN connection, the store's ``Listener``)."""

    LOCK = " FOR UPDATE OF k SKIP LOCKED"
    LOCK_LIMIT = " FOR UPDATE"

    def __init__(self, store: Any, *, poll_interval: float) -> None:
        super().__init__(store, poll_interval=poll_interval)
        self._pg: PostgresStore = store
        self._watched: dict[str, set[str]] = {}
        """Channel -> the keys waited on whose run it is."""
        self._queues: dict[str, str] = {}
        """Channel -> queue name, for the queues an executor waits on."""
        self._work = asyncio.Event()
        self.listener = Listener(store.url, on_notice=self._notice, on_listening=self._listening)

    def _channel(self, key: str) -> str:
        return _channel(self._pg._schema, key)

    @contextlib.asynccontextmanager
    async def _tx_cm(self) -> AsyncIterator[Session]:
        async with self._pg._conn() as conn, conn.transaction():
            yield _Session(conn)

    def _tx(self, *, sync: bool = True) -> contextlib.AbstractAsyncContextManager[Session]:
        return self._tx_cm()

    async def _one_transition(self, change: Change, now: float) -> bool:
        """One autocommitted statement, one round trip: the row's conditional update, the
        event at the position it returned, and the notice (a settle's on the run's effects
        channel, a release's on its queue's), each only when the update matched. The
        channel is ``postgres._channel`` computed in SQL from the row's run or queue."""
        effect_id, event, sets, guard, params = change
        notice = _NOTICES.get(event.kind, "")
        n = sets.count("?")
        args: list[Any] = [*params[:n], now, effect_id, *params[n:]]
        args += [effect_id, event.kind, event_data(event), now]
        if notice:
            args += [self._pg._schema, effect_id]
        statement = self._q(
            f"WITH u AS (UPDATE ledger_keys SET {sets}, position = position + 1, "
            f"updated_at = ? WHERE effect_id = ? AND {guard} "
            "RETURNING position, run_id, queue), "
            "i AS (INSERT INTO ledger_events (effect_id, seq, kind, data, created_at) "
            f"SELECT ?, position, ?, ?, ? FROM u) SELECT position{notice} FROM u"
        )
        async with self._pg._conn() as conn:
            cur = await conn.execute(statement, args)
            return await cur.fetchone() is not None

    async def _settled_notice(self, s: Session, run_id: str, effect_id: str, pos: int) -> None:
        await s.one(
            "SELECT pg_notify(%s, %s)", (self._channel(f"effects:{run_id}"), f"{effect_id}:{pos}")
        )

    async def _work_notice(self, s: Session, queue: str | None) -> None:
        if queue is not None:
            await s.one("SELECT pg_notify(%s, '')", (self._channel(f"queue:{queue}"),))

    def _on_watch(self, effect_id: str) -> None:
        channel = self._channel(f"effects:{self._run_of[effect_id]}")
        self._watched.setdefault(channel, set()).add(effect_id)
        self.listener.want(channel)

    def _on_unwatch(self, effect_id: str) -> None:
        run_id = self._run_of.pop(effect_id, None)
        if run_id is None:
            return
        channel = self._channel(f"effects:{run_id}")
        keys = self._watched.get(channel, set())
        keys.discard(effect_id)
        self.watch.forget(effect_id)
        if not keys:
            self._watched.pop(channel, None)
            self.listener.drop(channel)

    def _notice(self, channel: str, payload: str) -> None:
        if channel in self._queues:
            self._work.set()
            return
        effect_id, _, pos = payload.rpartition(":")
        if effect_id in self._watched.get(channel, ()):
            self.watch.changed(effect_id, int(pos) if pos.isdigit() else None)

    def _listening(self, channels: set[str] | None) -> None:
        if channels is None:  # (re)connected: anything may have settled meanwhile
            self.watch.changed_all()
            self._work.set()
            channels = set(self._watched)
        self.watch.heard(k for c in channels for k in self._watched.get(c, ()))

    async def wait_work(self, queues: Sequence[str], timeout: float) -> None:  # noqa: ASYNC109
        for q in queues:
            channel = self._channel(f"queue:{q}")
            if channel not in self._queues:
                self._queues[channel] = q
                self.listener.want(channel)
        if not self._work.is_set():
            await _until_set(self._work, max(0.0, timeout))
        self._work.clear()

    def read_sync(self, effect_id: str, *, now: float) -> KeyRow | None:
        try:
            with psycopg.connect(self._pg.url, autocommit=True) as conn:
                row = conn.execute(self._q(_READ).encode(), (now, effect_id)).fetchone()
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL failed at {self._pg.where}: {exc}") from exc
        return None if row is None else _key_row(row, bool(row[7]))

    async def close(self) -> None:
        await self.listener.close()
        await super().close()
