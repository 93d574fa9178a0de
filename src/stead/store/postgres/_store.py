"""``PostgresStore``: PostgreSQL's half of the shared SQL store (the pool, error translation,
notices and waiting, the statements whose shape is its own); the package's docstring
(``stead.store.postgres``) says what PostgreSQL adds and why each choice holds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Sequence
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.errors import UniqueViolation
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from stead.errors import StoreError
from stead.store import sql as _sql
from stead.store.postgres import _append, _batch, _chunks, _load
from stead.store.postgres._conn import (
    LINGER,
    Conn,
    PgSession,
    channel,
    migrate,
    network_options,
    pipelined,
    pooled,
    session_settings,
)
from stead.store.postgres._ledger import PostgresLedger
from stead.store.postgres._listen import Listener
from stead.store.postgres._together import RENEW_LEASES, Together
from stead.store.sql import Loaded, Watcher, known_key

log = logging.getLogger("stead.store")

_CONVERSATIONS = 0x436F6E76  # "Conv": the advisory locks of conversations (a key each)
_UNSYNCED = _append.UNSYNCED


class PostgresStore(_sql.SQLStore):
    """``Store`` on a PostgreSQL database (psycopg 3, an async connection pool)."""

    dialect = "postgres"
    GROUP_WIDTH = 4
    """Batches of appends on the wire at once at most (``store/sql/_group.py``, "Batches on
    the wire"), each on a connection of its own; fewer when the pool is smaller (two of its
    connections are left to the claims, loads, releases and renewals)."""
    PARAM = "%s"
    CONVERSATION_LOCK = f"SELECT pg_advisory_xact_lock({_CONVERSATIONS}, hashtext(?))"
    BYTES_DATA = True
    commits_ahead = True  # a commit is a round trip: overlapped with the model call after it
    CLAIMABLE_LINGER = 0.5
    """Seconds the claimable channel stays listened to after its last waiter left: a worker
    with free slots waits again within it (its claim between two waits is a round trip, a
    few even 50 ms away) and keeps listening; one whose slots stay full stops being woken
    by every notifying commit of the database within half a second."""
    CLAIM = _sql.SQLStore.CLAIM + " RETURNING epoch"
    """Synced, unlike SQLite's: a new epoch must not be lost while its owner lives on."""
    RENEW = _sql.SQLStore.RENEW + f" RETURNING {_UNSYNCED}"
    IDS_BY_BYTES = ('run_id COLLATE "C"', "SELECT to_regclass('runs_by_id_bytes') IS NOT NULL")

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 30.0,
        poll_interval: float = 1.0,
        idle_in_transaction_timeout: float = 10.0,
        statement_timeout: float = 5.0,
        lock_timeout: float = 2.0,
        network_timeout: float = 5.0,
        before_commit: _sql.BeforeCommit = _sql.crash_before_result,
    ) -> None:
        """``statement_timeout`` and ``lock_timeout`` bound each statement of the pool at the
        server; ``network_timeout`` bounds, at this end, a connection's unanswered bytes
        (``tcp_user_timeout``), its idle silence (keepalives) and its connecting."""
        self.url = url
        self.before_commit = before_commit
        try:
            parts = conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise StoreError(f"bad PostgreSQL URL: {exc}") from exc
        self.where = (
            f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}/"
            f"{parts.get('dbname') or parts.get('user') or ''}"
        )
        """host:port/database, for messages (never the password)."""
        self._min, self._max, self._timeout = min_size, max_size, timeout
        self._idle_tx_ms = int(idle_in_transaction_timeout * 1000)
        self._statement_ms = int(statement_timeout * 1000)
        self._lock_ms = int(lock_timeout * 1000)
        self._network_s = network_timeout
        self._network = network_options(network_timeout)
        self._probe_s = max(2, int(self._timeout))
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._opening = asyncio.Lock()
        self._gate = asyncio.Semaphore(max_size)
        """One place a connection of the pool: callers queue here, not in the pool."""
        self._gone = False
        """A connection died under a call, or none came in time: the server may be down, so
        calls ask it directly before queueing on the pool (see ``_reachable``)."""
        self._schema = "public"
        self._listener = Listener(url, on_notice=self._on_notice, on_listening=self._on_listening)
        self._watched: dict[str, str] = {}
        """Channel -> run id, for the runs someone waits on."""
        self._lingering: set[str] = set()
        """Runs whose channel a timer will drop unless someone waits on them again."""
        self._watch = Watcher(
            self._read_seqs,
            poll_interval=poll_interval,
            on_watch=self._on_watch,
            on_unwatch=self._on_unwatch,
        )
        self.claimable_channel = channel("public", "")
        """Where runs that became claimable are announced (set per schema once connected)."""
        self._claim_waits = 0
        """``wait_claimable`` calls under way."""
        self._claim_rested = 0.0
        """Loop time the last of them ended."""
        self._claim_timer: asyncio.TimerHandle | None = None
        self.notices = 0
        """Notices received by this store's listener (for tests and metrics)."""
        self._loads: Together[str, list[Sequence[Any]]] = Together(self._load_many, [])
        self._releases: Together[tuple[str, int, str], None] = Together(self._release_many, None)
        self.group.width = max(1, min(self.GROUP_WIDTH, max_size - 2))
        self._migrate()

    # -- plumbing ---------------------------------------------------------------------------

    async def _ensure(self) -> AsyncConnectionPool[Conn]:
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is not None:
                return self._pool
            pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
                self.url,
                min_size=self._min,
                max_size=self._max,
                timeout=self._timeout,
                kwargs={"autocommit": True, **self._network},
                configure=self._configure,
                open=False,
                name="stead",
            )
            try:
                await pool.open(wait=True, timeout=self._timeout)
            except (PoolTimeout, psycopg.Error) as exc:
                await pool.close()
                raise StoreError(f"cannot open PostgreSQL store at {self.where}: {exc}") from exc
            except BaseException:
                await pool.close()
                raise
            self._pool = pool
            return pool

    async def _configure(self, conn: Conn) -> None:
        await conn.execute(
            session_settings(
                idle_in_transaction_session_timeout=self._idle_tx_ms,
                statement_timeout=self._statement_ms,
                lock_timeout=self._lock_ms,
            )
        )

    def bound_waits(self, seconds: float) -> None:
        """See ``Store.bound_waits``: the statement, lock and network timeouts of the
        connections the pool makes from then on (a lease holder calls it before its first
        statement, when the pool has none yet). libpq counts ``connect_timeout`` in whole
        seconds and takes no less than 2; the TCP user timeout bounds a connect sooner."""
        if seconds <= 0:
            return
        ms = max(1, int(seconds * 1000))
        self._statement_ms = min(self._statement_ms, ms)
        self._lock_ms = min(self._lock_ms, ms)
        self._probe_s = min(self._probe_s, max(2, math.ceil(seconds)))
        if seconds < self._network_s:
            self._network_s = seconds
            self._network = network_options(seconds)
            if self._pool is not None:  # read at each connect the pool makes
                self._pool.kwargs = {"autocommit": True, **self._network}

    def _migrate(self) -> None:
        """Migrate and learn the schema (``migrate``), synchronously, like opening a SQLite
        file: a store is ready (or has failed naming the server) once constructed."""
        schema = self._schema = migrate(self.url, self.where, self._timeout, self._apply_migrations)
        self.claimable_channel = channel(schema, "")
        # A release announces a run it leaves claimable (a digest: safe as a literal).
        # Releases go together: (run ids, epochs, owners) as arrays (``release``).
        self.release_sql = (
            "WITH u AS (UPDATE runs r SET lease_owner = NULL, lease_expires_at = NULL"
            " FROM unnest(%s::text[], %s::bigint[], %s::text[]) AS h(run_id, epoch, owner)"
            " WHERE r.run_id = h.run_id AND r.epoch = h.epoch AND r.lease_owner = h.owner"
            f" RETURNING r.run_id, r.status, r.last_seq, {_UNSYNCED} AS unsynced)"
            f" SELECT CASE WHEN status IN ({_sql.CLAIMABLE_SQL}) THEN pg_notify("
            f"'{self.claimable_channel}', run_id || ':' || last_seq) END, unsynced FROM u"
        )

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[Conn]:
        """A pooled connection; psycopg and pool failures become ``StoreError``.

        On Python 3.11 the pool waits for a free connection with ``asyncio.wait_for``, which
        drops a cancellation that arrives as a connection frees up. A task cancelled while
        it waited here must still stop, so the lost cancellation is raised again.
        """
        pool = await self._ensure()
        await self._queue()
        try:
            await self._reachable(pool)
            task = asyncio.current_task()
            cancels = task.cancelling() if task is not None else 0
            try:
                async with pooled(pool, self._timeout, self._reachable) as conn:
                    if task is not None and task.cancelling() > cancels:
                        raise asyncio.CancelledError
                    try:
                        yield conn
                    except psycopg.Error:
                        self._gone = self._gone or conn.broken
                        raise
            except UniqueViolation as exc:
                raise _sql.Duplicate(exc.diag.message_primary) from exc
            except PoolTimeout as exc:
                self._gone = True
                raise StoreError(
                    f"no PostgreSQL connection free or reachable at {self.where} within "
                    f"{self._timeout:g}s: {exc}"
                ) from exc
            except psycopg.Error as exc:
                raise StoreError(f"PostgreSQL failed at {self.where}: {exc}") from exc
            if task is not None and task.cancelling() > cancels:
                raise asyncio.CancelledError
        finally:
            self._gate.release()

    async def _queue(self) -> None:
        """Wait for one of the pool's ``max_size`` places (``StoreError`` after ``timeout``).

        A thousand runs starting at once (a worker's claim) each ask for a connection; queued
        in the pool, each waiter cost about 4 KiB (its client, condition, ``wait_for`` task and
        timer), 4 MB of peak that left the worker's heap fragmented for as long as it held
        the runs. Queued here, a waiter is one future."""
        if not self._gate.locked():
            await self._gate.acquire()  # a place is free: taken at once, nothing allocated
            return
        try:
            async with asyncio.timeout(self._timeout):
                await self._gate.acquire()
        except TimeoutError as exc:
            self._gone = True
            raise StoreError(
                f"no PostgreSQL connection free at {self.where} within {self._timeout:g}s"
            ) from exc

    async def _reachable(self, pool: AsyncConnectionPool[Conn], waited: bool = False) -> None:
        """Once a call has seen the server go, or has ``waited`` a while for a connection
        (``pooled``), connect to it directly: ``StoreError`` at once if that fails. While the
        server is down the pool keeps reconnecting in the background and a call that asks it
        for a connection would wait its whole ``timeout`` (30 s by default): a worker whose
        database died would sit that long on every call (the append that failed, the reload,
        the lease release) before hearing why. A refused connection fails in microseconds.
        Once one succeeds, the connections that died with the old server are dropped."""
        if not (self._gone or waited):
            return
        try:
            probe = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, **{**self._network, "connect_timeout": self._probe_s}
            )
        except psycopg.Error as exc:
            self._gone = True
            raise StoreError(f"PostgreSQL at {self.where} is unreachable: {exc}") from exc
        await probe.close()
        if self._gone:
            self._gone = False
            await pool.check()

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[PgSession]:
        async with self._conn() as conn:
            yield PgSession(conn)

    # -- the dialect's half of SQLStore ------------------------------------------------------

    def _reading(self) -> contextlib.AbstractAsyncContextManager[PgSession]:
        # Autocommit: each statement sees one snapshot; the shared reads are written so
        # that is enough (a row's last_seq bounds what is read after it).
        return self._session()

    def _writing(self, *, sync: bool = True) -> contextlib.AbstractAsyncContextManager[PgSession]:
        # Unsynced writes say so in their own statement (``_UNSYNCED``): ``sync`` is unused.
        return self._session()

    async def load(self, run_id: str) -> Loaded:
        """See ``Store.load``: one statement (``_load``, with the snapshot's pieces), not
        the shared two, shared by the loads asked for in the same turn of the loop."""
        known_key(run_id)
        loaded = _load.loaded(run_id, await self._loads(run_id))
        return loaded if loaded is not None else await super().load(run_id)

    async def release(self, run_id: str, *, owner: str, epoch: int) -> None:
        """See ``Store.release``: the releases of one turn of the loop in one statement
        (``_together``; runs that move in step finish together), unsynced."""
        await self._releases((run_id, epoch, owner))

    async def _release_many(self, leases: list[tuple[str, int, str]]) -> dict[Any, None]:
        async with self._conn() as conn:
            await conn.execute(self.release_sql, tuple(map(list, zip(*leases, strict=True))))
        return {}

    async def _load_many(self, run_ids: list[str]) -> dict[str, list[Sequence[Any]]]:
        """``_load.LOAD`` of the runs of one turn's loads (``_together``)."""
        async with self._conn() as conn:
            rows = await (await conn.execute(_load.LOAD, (run_ids,))).fetchall()
        return _load.by_run(rows)

    async def _pack_snapshot(self, run_id: str, state: dict[str, Any]) -> bytes:
        """See ``_chunks``: a long state's lists are stored in pieces, once each."""
        head, pieces = _chunks.split(state)
        if pieces:
            async with self._conn() as conn:
                await _chunks.write(conn, run_id, pieces)
        return _sql.pack(head)

    async def _create(self, row: _sql.Row) -> None:
        run_id, agent, session_id, correlation_id, now, kind, version, turn, call, data = row
        async with self._conn() as conn:
            await conn.execute(
                "WITH r AS ("
                " INSERT INTO runs (run_id, agent, session_id, correlation_id, status,"
                " last_seq, epoch, created_at, updated_at)"
                " VALUES (%(run)s, %(agent)s, %(session)s, %(corr)s, 'queued', 1, 0,"
                " %(now)s, %(now)s) RETURNING run_id, run_no),"
                " e AS (INSERT INTO events (run_no, run_id, seq, kind, version, turn_index,"
                " tool_call_id, data, created_at)"
                " SELECT run_no, run_id, 1, %(kind)s, %(version)s, %(turn)s, %(call)s, %(data)s,"
                " %(now)s FROM r)"
                " SELECT pg_notify(%(ready)s, run_id || ':1') FROM r",
                {
                    "run": run_id,
                    "agent": agent,
                    "session": session_id,
                    "corr": correlation_id,
                    "now": now,
                    "kind": kind,
                    "version": version,
                    "turn": turn,
                    "call": call,
                    "data": data,
                    "ready": self.claimable_channel,
                },
            )

    async def _append(self, a: _sql.Append) -> None:
        run_id, events, _, expected, epoch, _, _, _, sync = a
        # One statement is one transaction (autocommit): one round trip. ``sync=False``: it
        # commits without waiting for the WAL flush (the module docstring says why that
        # loses no effect).
        async with self._conn() as conn:
            self.before_commit(run_id, events)  # the statement below is the commit
            cur = await conn.execute(_append.statement(a, sync), self._params(a))
            if await cur.fetchone() is None:
                raise await self.refusal(PgSession(conn), run_id, epoch, expected)

    async def _append_many(self, batch: Sequence[_sql.Append]) -> list[BaseException | None]:
        """See ``SQLStore._append_many``: the batch as one statement (``_batch``), one
        round trip and one transaction (one flush; none when no member asks for one). A
        member whose guard fails writes nothing and is told why; the others commit. As on
        the path of one append, ``before_commit`` sees every member before that round trip,
        which is the commit. A batch in which a run appears twice is cut into segments,
        their statements pipelined between BEGIN and COMMIT (still one Sync)."""
        sync = any(a[8] for a in batch)
        for a in batch:
            self.before_commit(a[0], a[1])
        parts = [
            (seg, *_batch.params(seg, self.run_channel, self.claimable_channel))
            for seg in _batch.segments(batch)
        ]
        async with self._conn() as conn:
            if len(parts) == 1:
                cursors = [await conn.execute(_batch.statement(parts[0][1], sync), parts[0][2])]
            else:
                cursors = await pipelined(
                    conn, [(_batch.statement(p[1], sync), p[2]) for p in parts]
                )
            outcomes: list[BaseException | None] = []
            for (seg, _, _), cur in zip(parts, cursors, strict=True):
                written = {r[0] for r in await cur.fetchall()}
                for a in seg:
                    outcomes.append(
                        None
                        if a[0] in written
                        else await self.refusal(PgSession(conn), a[0], a[4], a[3])
                    )
            return outcomes

    def _params(self, a: _sql.Append) -> dict[str, Any]:
        return _append.params(a, self.run_channel(a[0]), self.claimable_channel)

    async def _claimed(self, s: _sql.Session, params: Sequence[Any]) -> int | None:
        row = await s.one(self.CLAIM, params)
        return None if row is None else int(row[0])

    async def _claim_rows(
        self,
        *,
        owner: str,
        now: float,
        ttl: float,
        limit: int,
        agents: Sequence[str] | None,
        fingerprints: Sequence[str] | None = None,
    ) -> list[_sql.Row]:
        # Synced, as ``claim``: each claim makes a new epoch. Concurrent claimers skip each
        # other's rows (SKIP LOCKED) instead of queueing on them. The claimed runs are read
        # in the same statement (``_load.claim_and_load``): the round trip of a load less
        # between a run's claim and its first step.
        async with self._conn() as conn:
            cur = await conn.execute(
                _load.CLAIM_NEXT,
                {
                    "now": now,
                    "any_agent": agents is None,
                    "agents": list(agents or ()),
                    "any_version": fingerprints is None,
                    "versions": list(fingerprints or ()),
                    "limit": limit,
                    "owner": owner,
                    "until": now + ttl,
                },
            )
            rows = await cur.fetchall()
        return [
            (c.run_id, c.agent, c.status, c.epoch, c.previous_owner, c.loaded)
            for c in _load.claims(rows)
        ]

    def payload_bytes(self, run_id: str) -> int:
        """Bytes of event data plus snapshot state stored for one run, as stored (after
        PostgreSQL's own compression of large values)."""
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                row = conn.execute(_PAYLOAD_BYTES, {"run": run_id}).fetchone()
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL failed at {self.where}: {exc}") from exc
        return int(row[0]) if row else 0

    # -- notices and waiting ----------------------------------------------------------------

    @property
    def listening(self) -> bool:
        """Whether the LISTEN connection is up and listening to every channel wanted."""
        return self._listener.connected

    def run_channel(self, run_id: str) -> str:
        """The channel a run's appends are announced on."""
        return channel(self._schema, f"run:{run_id}")

    async def wait_changed(self, run_id: str, after_seq: int, timeout: float) -> int:  # noqa: ASYNC109
        known_key(run_id)
        return await self._watch.wait_changed(run_id, after_seq, timeout)

    async def wait_claimable(self, timeout: float) -> None:  # noqa: ASYNC109
        self._claim_waits += 1
        self._listener.want(self.claimable_channel)
        try:
            await self._watch.wait_claimable(timeout)
        finally:
            self._claim_waits -= 1
            self._claim_rested = asyncio.get_running_loop().time()
            if self._claim_timer is None:
                self._rest_claimable()

    def _rest_claimable(self) -> None:
        """Stop listening for claimable runs once nobody waited for ``CLAIMABLE_LINGER``
        seconds; until then look again when that time is up (one timer at a time)."""
        self._claim_timer = None
        if self._claim_waits:
            return  # the wait under way schedules the next look when it ends
        loop = asyncio.get_running_loop()
        due = self._claim_rested + self.CLAIMABLE_LINGER
        if loop.time() < due:
            self._claim_timer = loop.call_at(due, self._rest_claimable)
        else:
            self._listener.drop(self.claimable_channel)

    async def renew_leases(
        self, leases: Sequence[tuple[str, int]], *, owner: str, now: float, ttl: float
    ) -> list[str]:
        """See ``Store.renew_leases``: one unsynced statement for every lease."""
        if not leases:
            return []
        async with self._conn() as conn:
            cur = await conn.execute(
                RENEW_LEASES, (now + ttl, [r for r, _ in leases], [e for _, e in leases], owner)
            )
            kept = {r[0] for r in await cur.fetchall()}
        return [run_id for run_id, _ in leases if run_id not in kept]

    async def last_seqs(self, run_ids: Sequence[str]) -> dict[str, int]:
        """See ``Store.last_seqs``: one statement."""
        return await self._read_seqs(run_ids) if run_ids else {}

    async def _read_seqs(self, run_ids: Sequence[str]) -> dict[str, int]:
        async with self._conn() as conn:
            cur = await conn.execute(
                "SELECT run_id, last_seq FROM runs WHERE run_id = ANY(%s)", (list(run_ids),)
            )
            return {r[0]: r[1] for r in await cur.fetchall()}

    def _on_watch(self, run_id: str) -> None:
        channel = self.run_channel(run_id)
        self._watched[channel] = run_id
        self._listener.want(channel)

    def _on_unwatch(self, run_id: str) -> None:
        # Callers wait in short rounds (an owner watching its run for cancel requests):
        # keep listening a while, rather than UNLISTEN and LISTEN again every round.
        # One pending look per run: an owner's watcher ends a round every 0.2 s, and a timer
        # per round was 25 alive per held run at once.
        if run_id not in self._lingering:
            self._lingering.add(run_id)
            asyncio.get_running_loop().call_later(LINGER, self._drop_if_unwatched, run_id)

    def _drop_if_unwatched(self, run_id: str) -> None:
        self._lingering.discard(run_id)
        if not self._watch.watching(run_id):
            channel = self.run_channel(run_id)
            self._watched.pop(channel, None)
            self._listener.drop(channel)
            self._watch.forget(run_id)

    def _on_notice(self, channel: str, payload: str) -> None:
        self.notices += 1
        if channel == self.claimable_channel:
            self._watch.claimable()
        elif channel in self._watched:
            seq = payload.rpartition(":")[2]
            self._watch.changed(self._watched[channel], int(seq) if seq.isdigit() else None)

    def _on_listening(self, channels: set[str] | None) -> None:
        if channels is None:
            self._watch.changed_all()  # (re)connected: whatever happened meanwhile, re-read
            channels = set(self._watched)
        elif self.claimable_channel in channels:
            # Listening again after a rest: a run may have become claimable unheard since the
            # waiter's last claim, so it claims once more.
            self._watch.claimable()
        self._watch.heard(self._watched[c] for c in channels if c in self._watched)

    def open_ledger(self, *, poll_interval: float | None = None) -> PostgresLedger:
        """This store's execution ledger (``stead.store.ledger``) with its PostgreSQL half,
        polled every second unless told: notices wake its waiters, a poll covers a lost one."""
        return PostgresLedger(self, poll_interval=poll_interval or 1.0)

    async def close(self) -> None:
        if self._claim_timer is not None:
            self._claim_timer.cancel()
            self._claim_timer = None
        await self._listener.close()
        await self._watch.close()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


_PAYLOAD_BYTES = (
    "SELECT (SELECT COALESCE(SUM(pg_column_size(data)), 0) FROM events"
    " WHERE run_no = (SELECT run_no FROM runs WHERE run_id = %(run)s))"
    " + (SELECT COALESCE(SUM(pg_column_size(state)), 0) FROM snapshots WHERE run_id = %(run)s)"
    " + (SELECT COALESCE(SUM(pg_column_size(data)), 0) FROM snapshot_chunks"
    " WHERE run_id = %(run)s)"
)
"""A run's event data, snapshot and snapshot pieces, as stored (``payload_bytes``)."""
