"""The execution ledger's PostgreSQL half (``stead.store.ledger._ledger`` holds the rest).

Its writes run in an explicit transaction on a pooled connection (each is several
statements); a claim locks the rows it picks and skips those another executor is claiming
(``FOR UPDATE SKIP LOCKED``); a settle ``NOTIFY``-s its key and ledger position (never the
outcome) on the run's effects channel, and new work its queue's channel. A LISTEN connection of
its own (``stead.store.postgres._listen.Listener``) feeds the shared ``Watcher``: a notice wakes the
waiters on that key to re-read; a (re)connect wakes every waiter, since notices sent while it
was down are lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import psycopg

from stead.errors import StoreError
from stead.store.ledger import READ, Change, Claimed, KeyRow, Ledger, event_data, key_row
from stead.store.postgres._append import UNSYNCED
from stead.store.postgres._conn import LINGER, Conn, PgSession, channel
from stead.store.postgres._listen import Listener
from stead.store.sql import Row, Session, until_set


class _Pool(Protocol):
    """What the ledger's half uses of its ``PostgresStore`` (which imports this module)."""

    url: str
    where: str
    _schema: str

    def _conn(self) -> contextlib.AbstractAsyncContextManager[Conn]: ...

    def _session(self) -> contextlib.AbstractAsyncContextManager[PgSession]: ...


def _channel_sql(key: str) -> str:
    """``_conn.channel(schema, key)`` as SQL, the schema a parameter and ``key`` an
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
_CLAIMED_DATA = "'{\"epoch\":' || epoch || ',\"executor\":' || to_json(?::text)::text || '}'"
"""A claim's event data (``event_data``'s keys and order) with the epoch the update made."""
_ACCEPT = (
    "WITH k AS (INSERT INTO ledger_keys (effect_id, run_id, session_id, origin, kind, queue, "
    "assignment, phase, epoch, position, created_at, updated_at) "
    "VALUES (%s, %s, %s, 'accepted', %s, %s, %s, 'accepted', 0, 1, %s, %s) "
    "ON CONFLICT (effect_id) DO NOTHING RETURNING effect_id), "
    "e AS (INSERT INTO ledger_events (effect_id, seq, kind, data, created_at) "
    "SELECT effect_id, 1, 'accepted', '{}', %s FROM k) SELECT "
)
"""An acceptance of a new key: its row and first event (``Ledger._origin``), then the notice."""
_STARTS = "(k.kind = 'model' OR strpos(k.assignment, '\"effect_class\":\"non_idempotent\"') = 0)"
"""Whether a claimed key's ``started`` can ride in its claim: any key but a non_idempotent
tool's (``Ledger.start``). The assignment is ``accept``'s compact JSON, whose tool fields are
fixed and whose arguments are a JSON string (a quote in it is escaped), so the class shows
as that exact text; a model key's request may hold anything, and is never non_idempotent."""
_CLAIM_FAST = (
    f"WITH p AS (SELECT k.effect_id, %(start)s AND {_STARTS} AS starts FROM ledger_keys k "
    "WHERE k.phase = 'accepted' AND k.cancel = 0 AND k.queue = ANY(%(queues)s) AND NOT EXISTS "
    "(SELECT 1 FROM queue_limits q WHERE q.queue = k.queue) "
    "ORDER BY k.updated_at LIMIT %(limit)s FOR UPDATE OF k SKIP LOCKED), "
    "u AS (UPDATE ledger_keys k SET epoch = k.epoch + 1, executor = %(executor)s, "
    "phase = CASE WHEN p.starts THEN 'started' ELSE 'claimed' END, "
    "position = k.position + CASE WHEN p.starts THEN 2 ELSE 1 END, updated_at = %(now)s "
    "FROM p WHERE k.effect_id = p.effect_id AND k.phase = 'accepted' "
    "RETURNING k.effect_id, k.position, k.epoch, k.assignment, k.queue, p.starts), "
    "i AS (INSERT INTO ledger_events (effect_id, seq, kind, data, created_at) "
    "SELECT effect_id, position - CASE WHEN starts THEN 1 ELSE 0 END, 'claimed', "
    + _CLAIMED_DATA.replace("?", "%(executor)s")
    + ", %(now)s FROM u UNION ALL SELECT effect_id, position, 'started', "
    "'{\"epoch\":' || epoch || '}', %(now)s FROM u WHERE starts) "
    f"SELECT effect_id, epoch, assignment, queue, starts, {UNSYNCED} FROM u "
    "UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL WHERE "
    "EXISTS (SELECT 1 FROM queue_limits WHERE queue = ANY(%(queues)s)) "
    "OR EXISTS (SELECT 1 FROM ledger_keys k WHERE k.queue = ANY(%(queues)s) "
    "AND k.phase IN ('accepted', 'claimed', 'started') AND CASE WHEN k.phase = 'accepted' "
    "THEN k.cancel = 1 ELSE k.executor <> %(executor)s AND NOT EXISTS (SELECT 1 FROM "
    "executors x WHERE x.executor_id = k.executor AND x.lease_expires_at > %(now)s) END)"
)
"""A claim's common case in one statement: accepted keys of queues without a limit, and a
last row of NULLs when something needs ``Ledger.claim``'s general path (a queue with a limit
or a pause, an orphaned key of another executor, a cancelled one). It commits without
waiting for the WAL flush (``UNSYNCED``, once per key claimed); why that is safe is
``PostgresLedger``'s docstring."""


class PostgresLedger(Ledger):
    """PostgreSQL: an explicit transaction; claims skip each other's locked rows; settles
    and new work are notified (a second LISTEN connection, the store's ``Listener``).

    A claim of the common case does not wait for the WAL flush; the acceptance before it
    does, and so do a non_idempotent tool's start and settle (any other settle does not:
    lost, it leaves its key held with no task, which the holder's heartbeat gives back to
    run again, ``_strays``; a synced commit after it, the run's record of the outcome or
    the next heartbeat, flushes it). What a crash of the database server can lose is a
    suffix of the log (a flush covers every record before it), so a claim is lost only with
    what came after it and never with the acceptance before it: the key is accepted again,
    at the epoch it had, and no executor holds it. Its old holder may have begun the effect:

    - a ``non_idempotent`` tool never: its ``started`` waits for the flush, which makes
      the claim durable first, and the effect begins only once that write returned (a write
      cut by the crash raises, and the effect is not begun);
    - any other effect (a model call, a ``read_only`` or ``idempotent_write`` tool) may
      be running, as after an executor that died once it had claimed or started it: those
      classes are performed again on recovery (``core.ledger.recovery_of``) and this is
      the same case. The next claim makes the same epoch number again, so ``start`` and
      ``settle`` name their executor besides the epoch (``_ledger._held``): the old holder's
      writes are refused, its heartbeat finds it holds nothing and its signal fires, as for
      a zombie's. One settle lands; the run records one result.

    A limited queue's claim (the general path, in a transaction) stays synced: a lost claim
    there could let the fleet exceed its limit while the old holder still runs."""

    LOCK = " FOR UPDATE OF k SKIP LOCKED"
    LOCK_LIMIT = " FOR UPDATE"
    SKIP_FLUSH = f"SELECT {UNSYNCED}"

    def __init__(self, store: Any, *, poll_interval: float) -> None:
        super().__init__(store, poll_interval=poll_interval)
        self._pg: _Pool = store
        self._watched: dict[str, set[str]] = {}
        """Channel -> the keys waited on whose run it is."""
        self._queues: dict[str, str] = {}
        """Channel -> queue name, for the queues an executor waits on."""
        self._work = asyncio.Event()
        self.listener = Listener(store.url, on_notice=self._notice, on_listening=self._listening)

    def _channel(self, key: str) -> str:
        return channel(self._pg._schema, key)

    @contextlib.asynccontextmanager
    async def _tx_cm(self) -> AsyncIterator[Session]:
        async with self._pg._conn() as conn, conn.transaction():
            yield PgSession(conn)

    def _tx(self, *, sync: bool = True) -> contextlib.AbstractAsyncContextManager[Session]:
        return self._tx_cm()

    async def _transition(
        self, s: Session, change: Change, now: float, *, sync: bool = True
    ) -> Row | None:
        """One round trip: the row's conditional update, the event at the position it
        returned (a claim's data carries the epoch the update made), and the notice (a
        settle's on the run's effects channel, a release's on its queue's), each only when
        the update matched. The channel is ``_conn.channel`` computed in SQL from the
        row's run or queue."""
        effect_id, event, sets, guard, params = change
        notice = _NOTICES.get(event.kind, "")
        n = sets.count("?")
        args: list[Any] = [*params[:n], now, effect_id, *params[n:], effect_id, event.kind]
        if event.kind == "claimed":
            data = _CLAIMED_DATA
            args += [event.executor or ""]
        else:
            data = "?"
            args += [event_data(event)]
        args.append(now)
        if notice:
            args += [self._pg._schema, effect_id]
        unsynced = "" if sync else f", {UNSYNCED}"
        statement = self._q(
            f"WITH u AS (UPDATE ledger_keys SET {sets}, position = position + 1, "
            f"updated_at = ? WHERE effect_id = ? AND {guard} "
            "RETURNING position, run_id, epoch, queue), "
            "i AS (INSERT INTO ledger_events (effect_id, seq, kind, data, created_at) "
            f"SELECT ?, position, ?, {data}, ? FROM u) "
            f"SELECT position, run_id, epoch, queue{notice}{unsynced} FROM u"
        )
        return await s.one(statement, args)

    def _single(self, *, sync: bool) -> contextlib.AbstractAsyncContextManager[Session]:
        return self._pg._session()  # the statement says whether it waits for the flush

    async def _accept_new(
        self, s: Session, key: tuple[str, str, str], kind: str, queue: str | None, text: str,
        now: float,
    ) -> bool:  # fmt: skip
        """``Ledger._accept_new`` in one autocommitted statement (``_single``): the row, the
        first event and the queue's notice."""
        effect_id, run_id, session_id = key
        notice = "pg_notify(%s, '')" if queue is not None else "1"
        args: list[Any] = [effect_id, run_id, session_id, kind, queue, text, now, now, now]
        if queue is not None:
            args.append(self._channel(f"queue:{queue}"))
        return await s.one(_ACCEPT + notice + " FROM k", args) is not None

    async def claim(
        self, executor: str, queues: Sequence[str], *, limit: int, now: float, start: bool = False
    ) -> list[Claimed]:
        """``Ledger.claim``: its common case in one round trip (``_CLAIM_FAST``), which does
        not wait for the WAL flush (see the class) and, with ``start``, writes ``started``
        in it for every key but a non_idempotent tool's; the general path (several
        statements in a transaction) only when that says it is needed."""
        if limit < 1 or not queues:
            return []
        args = {
            "queues": list(queues), "limit": limit, "executor": executor, "now": now,
            "start": start,
        }  # fmt: skip
        async with self._pg._conn() as conn:
            rows = await (await conn.execute(_CLAIM_FAST, args)).fetchall()
        out = [Claimed(r[0], int(r[1]), json.loads(r[2]), False, r[3], r[4]) for r in rows if r[0]]
        if len(out) < len(rows) and len(out) < limit:
            out += await super().claim(executor, queues, limit=limit - len(out), now=now)
        return out

    def _on_watch(self, effect_id: str) -> None:
        channel = self._channel(f"effects:{self._run_of[effect_id]}")
        self._watched.setdefault(channel, set()).add(effect_id)
        if self.listener.listening(channel):
            # Another key of the run is (or was just) waited on: its channel is heard, so
            # this key's first read plus the notices after it are the truth.
            self.watch.heard((effect_id,))
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
            # A run's effects come one after another: keep its channel a while rather than
            # UNLISTEN and LISTEN again for the next key.
            asyncio.get_running_loop().call_later(LINGER, self._drop_if_unwatched, channel)

    def _drop_if_unwatched(self, channel: str) -> None:
        if not self._watched.get(channel):
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
            await until_set(self._work, max(0.0, timeout))
        self._work.clear()

    def read_sync(self, effect_id: str, *, now: float) -> KeyRow | None:
        try:
            with psycopg.connect(self._pg.url, autocommit=True) as conn:
                row = conn.execute(self._q(READ).encode(), (now, effect_id)).fetchone()
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL failed at {self._pg.where}: {exc}") from exc
        return None if row is None else key_row(row, bool(row[7]))

    async def close(self) -> None:
        await self.listener.close()
        await super().close()
