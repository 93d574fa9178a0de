"""What the SQLite and PostgreSQL stores share, written once: the base class ``SQLStore``.

A dialect (``stead.store.sqlite``, ``stead.store.postgres``) supplies only what differs: how it
connects; how a transaction is bracketed and locked (``_reading``, ``_writing``); notices and
waiting; how its driver's errors become stead's (a unique index's refusal is ``Duplicate``,
anything else a ``StoreError``); its placeholder; and the few statements whose shape differs
(run creation, the append, ``claim_next``, and the lease writes PostgreSQL turns unsynced or
announces). The rest is here: the run row and its columns, the migration runner, snapshot
packing, the statements both dialects run as written, and what a refused write or a held lease
says.
DBOS divides its system database the same way (``_sys_db.py`` and small
``_sys_db_sqlite.py`` / ``_sys_db_postgres.py``).

Crash tests and production take the same path: every append calls the store's
``before_commit`` hook with its events, unconditionally, at the last moment before it commits:
SQLite inside its write transaction after the statements (the rows are written, COMMIT has
not run); PostgreSQL just before its one autocommitted statement, which is its commit (an
explicit transaction would cost two more round trips on every append, for a test). Whatever
the hook raises (or a SIGKILL in it) leaves nothing written. The default hook is the named
crash point ``before_result_commit``, which does nothing unless a test armed it
(``stead._crash``); a test may inject any other callable.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Protocol, Unpack

from stead import _crash
from stead.core.events import Event, RunCreated
from stead.errors import Conflict, Fenced, LeaseHeld, RunNotFound, SchemaTooNew, UserError
from stead.store.sql._base import (
    CLAIMABLE,
    Claim,
    Claiming,
    Duplicate,
    Loaded,
    RunRecord,
    StoredEvent,
    append_refusal,
    created_row,
    decode_events,
    event_row,
    known_key,
    snapshot_state,
    snapshot_text,
)
from stead.store.sql._chat import ChatRows
from stead.store.sql._group import GroupCommit
from stead.store.sql._migrations import migrations, statements
from stead.store.sql._search import SearchRows

RUN_COLUMNS = (
    "run_id, agent, session_id, correlation_id, status, last_seq, epoch, lease_owner, "
    "lease_expires_at, created_at, updated_at"
)
"""The run row's columns, in ``RunRecord``'s order (``record`` reads them back)."""
CLAIMABLE_SQL = ", ".join(f"'{s}'" for s in CLAIMABLE)
"""``CLAIMABLE`` as an SQL list, for ``status IN (...)``."""

Row = tuple[Any, ...]
BeforeCommit = Callable[[str, Sequence[Event]], None]
"""``before_commit(run_id, events)``: called by every append just before it commits."""


def record(row: Sequence[Any]) -> RunRecord:
    """A ``RunRecord`` from a row that starts with ``RUN_COLUMNS``."""
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


# -- snapshots ----------------------------------------------------------------------------


def pack(state: dict[str, Any]) -> bytes:
    """A snapshot row, on both backends: the zlib-compressed ``snapshot_text`` (the state's
    JSON behind a line with its sha256, which ``unpack`` verifies).

    A snapshot holds the whole conversation, which the log already holds once; compressing
    the copy (and so the pages and WAL each rewrite costs) keeps a run's size close to its
    content. Level 1: most of the saving for a fraction of the time of the default level.
    """
    return zlib.compress(snapshot_text(state).encode("utf-8"), 1)


def unpack(data: bytes) -> dict[str, Any] | None:
    """The state of a snapshot row whose checksum holds; None for anything else.

    The row is zlib-compressed (``pack``) or plain text (``{``: written by hand, by SQLite
    stores before they compressed, and by PostgreSQL stores before migration 0002; ``s``:
    checksummed text). Rows written before snapshots carried a checksum (an older SQLite store's
    blob, PostgreSQL's text) still decompress and decode, and are then ignored like any
    snapshot that cannot show it is the one written: the run loads by folding its log, and
    its next snapshot is checksummed. Damage of any kind is None too: a snapshot is a cache.
    """
    try:
        if data[:1] not in (b"{", b"s"):
            data = zlib.decompress(data)
        return snapshot_state(data.decode("utf-8"))
    except (ValueError, zlib.error):  # UnicodeDecodeError is a ValueError
        return None


def snapshot_of(seq: Any, data: Any, last_seq: int) -> tuple[dict[str, Any] | None, int]:
    """(state, seq) of a snapshot row, or (None, 0) when there is none or it is unreadable:
    a snapshot is a cache, so anything wrong with it means "fold the log instead"."""
    if data is None or not isinstance(seq, int) or not 0 < seq <= last_seq:
        return None, 0
    try:
        state = unpack(bytes(data))
    except TypeError:
        return None, 0
    return (state, seq) if state is not None else (None, 0)


# -- what refusals say --------------------------------------------------------------------


def result_recorded(run_id: str, exc: Duplicate) -> Conflict:
    """An append the unique index of results refused (guarantee 2)."""
    return Conflict(f"run {run_id}: a result for this tool call is already recorded ({exc})")


def lease_held(rec: RunRecord) -> LeaseHeld:
    """Another owner's lease on the run is live."""
    return LeaseHeld(
        f"run {rec.run_id} is owned by {rec.lease_owner} until "
        f"{rec.lease_expires_at or 0:.0f}; wait for the lease to lapse or stop that worker"
    )


def lease_lost(run_id: str, owner: str, epoch: int) -> Fenced:
    """A renewal by an owner whose epoch is no longer the run's."""
    return Fenced(f"run {run_id}: lease of {owner} at epoch {epoch} was taken over")


def crash_before_result(run_id: str, events: Sequence[Event]) -> None:
    """The default ``before_commit``: the crash point ``before_result_commit`` of an append
    that records a tool result (a test arms it; unarmed it costs one test)."""
    if _crash.armed():  # each result's tool: a commit may carry several (held ones)
        for e in events:
            if e.kind == "tool_result_recorded":
                _crash.point("before_result_commit", getattr(e, "name", None))


def unarmed(hook: BeforeCommit) -> bool:
    """Whether ``hook`` is the default ``crash_before_result`` with no crash point armed: a
    batch then need not call it for each member (it would do nothing each time)."""
    return hook is crash_before_result and not _crash.armed()


# -- the base -----------------------------------------------------------------------------


EventRow = tuple[str, int, int | None, str | None, str | bytes]
"""(kind, version, turn_index, tool_call_id, data): ``event_row`` of an event."""


def utf8_rows(rows: list[EventRow]) -> list[EventRow]:
    """``rows`` with every data as bytes, for a dialect whose column is bytes (PostgreSQL's
    ``bytea``: text sent to it would be parsed as bytea's escape syntax)."""
    return [r if isinstance(r[4], bytes) else (*r[:4], r[4].encode("utf-8")) for r in rows]


Packed = tuple[int, int, bytes]
"""A snapshot to write: (seq, version, ``pack``-ed state)."""
Append = tuple[str, Sequence[Event], list[EventRow], int, int, str, float, Packed | None, bool]
"""One append, checked and encoded, for the dialect to write (``SQLStore._append``):
(run_id, events, rows, expected_seq, epoch, status, now, snapshot, sync). A plain tuple, not
a NamedTuple: one is made on every append, and a NamedTuple's constructor costs a µs more."""


# -- the session -----------------------------------------------------------------------------


class Session(Protocol):
    """One transaction (SQLite) or connection (PostgreSQL, autocommit) the shared code runs
    statements on. Driver errors come out translated: ``Duplicate`` or ``StoreError``."""

    async def all(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of ``query``."""
        ...

    async def one(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of ``query``, None without one."""
        ...

    async def run(self, query: str, params: Sequence[Any] = ()) -> int:
        """Execute a write; the number of rows it changed."""
        ...


class SQLStore(ChatRows, SearchRows):
    """The ``Store`` contract over SQL, for a dialect to complete (see the module docstring).

    Statements are written once with ``?`` placeholders; a dialect whose driver wants another
    (``PARAM``) gets them rewritten once, when its class is made. ``DATA`` and ``STATE`` are how
    it reads the event data and snapshot columns (SQLite casts them to bytes, so text that is
    not UTF-8 reaches the decoder, which calls it corrupt, instead of failing in the driver).
    """

    dialect: ClassVar[str]
    """The folder of its migrations."""
    where: str
    """The store as messages name it (a file, a server and database; never a password)."""
    PARAM: ClassVar[str] = "?"
    DATA: ClassVar[str] = "e.data"
    STATE: ClassVar[str] = "s.state"
    SYNCED_CLAIMS: ClassVar[bool] = True
    """Whether ``claim`` waits for the disk (see each dialect for why it does or not)."""
    BYTES_DATA: ClassVar[bool] = False
    """Whether event data is written as bytes only (``utf8_rows``); SQLite keeps a small
    row's JSON as text, readable in its shell."""
    commits_ahead: ClassVar[bool] = False
    """See ``Store.commits_ahead``."""

    SELECT_RUN: ClassVar[str] = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"
    GROUP_WIDTH: ClassVar[int] = 1
    """Batches of appends under way at once (``GroupCommit.width``)."""
    POSITION: ClassVar[str] = "SELECT last_seq, epoch FROM runs WHERE run_id = ?"
    """What ``append_refusal`` diagnoses a refused append from."""
    LOAD: ClassVar[str] = (
        f"SELECT {', '.join('r.' + c for c in RUN_COLUMNS.split(', '))}, s.seq, {{state}} "
        "FROM runs r LEFT JOIN snapshots s ON s.run_id = r.run_id WHERE r.run_id = ?"
    )
    """The row and its snapshot in one statement (one snapshot of the database)."""
    TAIL: ClassVar[str] = (
        "SELECT e.seq, e.kind, e.version, {data}, e.created_at FROM events e "
        "WHERE e.run_no = (SELECT run_no FROM runs WHERE run_id = ?) AND e.seq > ? "
        "AND e.seq <= ? ORDER BY e.seq"
    )
    """Events after the snapshot up to the row's last_seq (which commits with its events),
    by the run's number: both stores index events by it (migrations 0008 and 0009)."""
    READ_EVENTS: ClassVar[str] = (
        "SELECT r.last_seq, e.seq, e.kind, e.version, {data}, e.created_at FROM runs r "
        "LEFT JOIN events e ON e.run_no = r.run_no AND e.seq > ? WHERE r.run_id = ? "
        "ORDER BY e.seq"
    )
    """The run's last_seq and its events after a point, from one snapshot of the database."""
    READ_SOME: ClassVar[str] = READ_EVENTS + " LIMIT ?"
    """The same, the first ``limit`` events only (a conversation's chain reads one each)."""
    LIST_ALL: ClassVar[str] = f"SELECT {RUN_COLUMNS} FROM runs ORDER BY updated_at DESC LIMIT ?"
    LIST_BY_STATUS: ClassVar[str] = (
        f"SELECT {RUN_COLUMNS} FROM runs WHERE lease_owner IS NULL AND status = ? "
        f"UNION ALL SELECT {RUN_COLUMNS} FROM runs WHERE lease_owner IS NOT NULL AND status = ? "
        "ORDER BY updated_at DESC LIMIT ?"
    )
    """Two halves, so that on SQLite each uses its index (migration 0002): the runs nobody
    holds by (status, updated_at), the few held ones by lease. PostgreSQL merges the two."""
    CLAIM: ClassVar[str] = (
        "UPDATE runs SET epoch = epoch + 1, lease_owner = ?, lease_expires_at = ? "
        "WHERE run_id = ? AND (lease_owner IS NULL OR COALESCE(lease_expires_at, 0) <= ? "
        "OR lease_owner = ? OR lease_owner = ?)"
    )
    """Take the lease unless another owner's is live (the caller's own, or one that
    ``takeover_from`` names, does not count)."""
    RENEW: ClassVar[str] = (
        "UPDATE runs SET lease_expires_at = ? WHERE run_id = ? AND epoch = ? AND lease_owner = ?"
    )
    release_sql: str = (
        "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
        "WHERE run_id = ? AND epoch = ? AND lease_owner = ?"
    )
    """Drop our lease if we still hold it (PostgreSQL's also announces the run)."""

    _QUERIES: ClassVar[tuple[str, ...]] = (
        "SELECT_RUN",
        "POSITION",
        "LOAD",
        "TAIL",
        "READ_EVENTS",
        "READ_SOME",
        "LIST_ALL",
        "LIST_BY_STATUS",
        "CLAIM",
        "RENEW",
        "release_sql",
    )

    before_commit: BeforeCommit
    """Called by every append with its run id and events just before it commits (see the
    module docstring for where exactly); whatever it raises aborts the append with nothing
    written."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls._QUERIES:
            text = getattr(cls, name).replace("{data}", cls.DATA).replace("{state}", cls.STATE)
            setattr(cls, name, text.replace("?", cls.PARAM))

    # -- what a dialect supplies ----------------------------------------------------------

    def _reading(self) -> AbstractAsyncContextManager[Session]:
        """Where the shared reads run: one transaction on SQLite; autocommitted statements
        on PostgreSQL, which the reads allow for (each is one statement, or a tail bounded by
        the last_seq of the row read before it, which commits together with its events)."""
        raise NotImplementedError

    def _writing(self, *, sync: bool = True) -> AbstractAsyncContextManager[Session]:
        """A write transaction; ``sync=False`` may skip waiting for the disk (a dialect that
        turns that off inside its statements ignores it)."""
        raise NotImplementedError

    def _writing_one(self, *, sync: bool = True) -> AbstractAsyncContextManager[Session]:
        """Where a write of ONE statement runs (a renewal, a release; a read after
        it only says why it changed nothing): ``_writing`` unless the dialect can commit one
        statement without a transaction around it."""
        return self._writing(sync=sync)

    async def _create(self, row: Row) -> None:
        """Insert the run (queued, seq 1, epoch 0) and its first event: ``row`` is (run_id,
        agent, session_id, correlation_id, now, kind, version, turn, call, data)."""
        raise NotImplementedError

    async def _append(self, a: Append) -> None:
        """Write the rows after ``expected_seq`` if the run is at that sequence and epoch,
        else raise ``refusal``'s answer; keep the snapshot alongside. Calls
        ``before_commit(run_id, events)`` unconditionally at its last moment before the
        commit."""
        raise NotImplementedError

    async def _append_many(self, batch: Sequence[Append]) -> list[BaseException | None]:
        """Write several appends (of different runs, or of one run in order) in ONE
        transaction: each member's guard checked on its own, the members whose guard holds
        written, and ``before_commit`` called for each of those (or, where the commit is the
        round trip that also checks the guards, for every member) before the commit. Returns
        each member's refusal (None: written). Raises, with nothing written, when the
        transaction as a whole fails (``GroupCommit`` then writes each member alone)."""
        raise NotImplementedError

    async def _claimed(self, s: Session, params: Sequence[Any]) -> int | None:
        """Run ``CLAIM`` with ``params``; the new epoch, or None when it changed nothing."""
        raise NotImplementedError

    async def _claim_rows(
        self,
        *,
        owner: str,
        now: float,
        ttl: float,
        limit: int,
        agents: Sequence[str] | None,
        fingerprints: Sequence[str] | None = None,
    ) -> list[Row]:
        """Claim runs as ``claim_next`` says: (run_id, agent, status, new epoch, previous
        owner) of each, and its ``Claim.loaded`` where the dialect reads it in the same
        statement; with ``fingerprints``, none pinned to another version (``run_pins``)."""
        raise NotImplementedError

    # -- shared plumbing ------------------------------------------------------------------

    def _apply_migrations(self, execute: Callable[[str, Sequence[Any]], Iterable[Row]]) -> None:
        """Apply the dialect's migrations that ``schema_migrations`` does not list, with
        ``execute`` inside the caller's transaction (which also keeps other migrators out)."""
        execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL)",
            (),
        )
        done = {r[0] for r in execute("SELECT version FROM schema_migrations", ())}
        known = migrations(self.dialect)
        newest = known[-1][0]
        if done and max(done) > newest:
            # Migrated by a newer stead: refused before this code reads or writes a row.
            raise SchemaTooNew(self.where, max(done), newest)
        insert = "INSERT INTO schema_migrations (version, name) VALUES (?, ?)"
        for version, name, sql in known:
            if version not in done:
                for statement in statements(sql):
                    execute(statement, ())
                execute(insert.replace("?", self.PARAM), (version, name))

    async def _row(self, s: Session, run_id: str) -> RunRecord:
        row = await s.one(self.SELECT_RUN, (run_id,))
        if row is None:
            raise RunNotFound(run_id)
        return record(row)

    async def refusal(self, s: Session, run_id: str, epoch: int, expected_seq: int) -> Exception:
        """Why a guarded append changed nothing: missing run, stale owner or stale seq."""
        return append_refusal(run_id, await s.one(self.POSITION, (run_id,)), epoch, expected_seq)

    # -- the contract ---------------------------------------------------------------------

    async def create_run(self, event: RunCreated, *, now: float) -> None:
        """See ``Store.create_run``. The event is checked before anything is written
        (``created_row``: a refusal is an ``InvalidInput`` naming the caller's argument)."""
        kind, version, turn, call, data = created_row(event)
        if self.BYTES_DATA and isinstance(data, str):
            data = data.encode("utf-8")
        row = (event.run_id, event.agent, event.session_id, event.correlation_id, now)
        try:
            await self._create((*row, kind, version, turn, call, data))
        except Duplicate as exc:
            raise Conflict(f"run {event.run_id!r} already exists") from exc

    async def append(
        self,
        run_id: str,
        events: Sequence[Event],
        *,
        expected_seq: int,
        epoch: int,
        status: str,
        now: float,
        snapshot: tuple[int, dict[str, Any]] | None = None,
        sync: bool = True,
    ) -> int:
        """See ``Store.append``: the options are ``Appending``'s, spelled out here because
        this is every step (``**options`` costs a dict and its lookups per append, about 1 %
        of a step's instructions); mypy holds them to ``Appending`` wherever a store is used
        as a ``Store``. Every event is checked (``event_row``: ``InvalidEvent``) before the
        dialect writes anything."""
        if not events:
            return expected_seq
        rows = list(map(event_row, events))
        if self.BYTES_DATA:
            rows = utf8_rows(rows)
        packed = None
        if snapshot is not None:
            state = snapshot[1]
            packed = (snapshot[0], int(state.get("v", 0)), await self._pack_snapshot(run_id, state))
        a = (run_id, events, rows, expected_seq, epoch, status, now, packed, sync)
        group = self.group
        if run_id != group.last or group.task is not None:
            await group.submit(run_id, a)  # other runs are appending: join their batch
            return expected_seq + len(rows)
        await self._append_alone(a)  # a run appending alone: the path without group commit
        return expected_seq + len(rows)

    @functools.cached_property
    def group(self) -> GroupCommit:
        """This store's group commit (``stead.store.sql._group``): the appends of many runs of
        this process in one transaction. ``group.after_batch`` is a test's seam."""
        return GroupCommit(self._append_alone, self._append_many, width=self.GROUP_WIDTH)

    async def _pack_snapshot(self, run_id: str, state: dict[str, Any]) -> bytes:
        """A snapshot row's state column (PostgreSQL stores its long lists apart first)."""
        return pack(state)

    async def _append_alone(self, a: Append) -> None:
        try:
            await self._append(a)
        except Duplicate as exc:
            raise result_recorded(a[0], exc) from exc

    async def load(self, run_id: str) -> Loaded:
        """See ``Store.load``."""
        known_key(run_id)
        async with self._reading() as s:
            row = await s.one(self.LOAD, (run_id,))
            if row is None:
                raise RunNotFound(run_id)
            rec = record(row)
            snapshot, snap_seq = snapshot_of(row[11], row[12], rec.last_seq)
            rows = await s.all(self.TAIL, (run_id, snap_seq, rec.last_seq))
        tail = decode_events(run_id, rows, snap_seq, rec.last_seq)
        return Loaded(record=rec, snapshot=snapshot, snapshot_seq=snap_seq, tail=tail)

    async def read_events(
        self, run_id: str, after: int = 0, *, limit: int | None = None
    ) -> list[StoredEvent]:
        """See ``Store.read_events``."""
        known_key(run_id)
        if limit is not None and (type(limit) is not int or limit < 1):
            raise UserError(f"read_events: limit takes a positive int or None, not {limit!r:.40}")
        async with self._reading() as s:
            if limit is None:
                rows = await s.all(self.READ_EVENTS, (after, run_id))
            else:
                rows = await s.all(self.READ_SOME, (after, run_id, limit))
        if not rows:
            raise RunNotFound(run_id)
        last = rows[0][0] if limit is None else min(rows[0][0], after + limit)
        return decode_events(run_id, [r[1:] for r in rows if r[1] is not None], after, last)

    async def get_run(self, run_id: str) -> RunRecord:
        """See ``Store.get_run``."""
        known_key(run_id)
        async with self._reading() as s:
            return await self._row(s, run_id)

    async def check_schema(self) -> None:
        """``SchemaTooNew`` when a newer stead has migrated the store since this one opened
        it: a process that outlives an upgrade (a worker) asks now and then, and stops."""
        newest = migrations(self.dialect)[-1][0]
        async with self._reading() as s:
            row = await s.one("SELECT max(version) FROM schema_migrations", ())
        found = row[0] if row is not None and row[0] is not None else 0
        if found > newest:
            raise SchemaTooNew(self.where, found, newest)

    async def list_runs(self, *, status: str | None = None, limit: int = 100) -> list[RunRecord]:
        """See ``Store.list_runs``."""
        async with self._reading() as s:
            if status is None:
                rows = await s.all(self.LIST_ALL, (limit,))
            else:
                rows = await s.all(self.LIST_BY_STATUS, (status, status, limit))
        return [record(r) for r in rows]

    async def claim(
        self, run_id: str, *, owner: str, now: float, ttl: float, takeover_from: str | None = None
    ) -> int:
        """See ``Store.claim``."""
        params = (owner, now + ttl, run_id, now, owner, takeover_from)
        async with self._writing(sync=self.SYNCED_CLAIMS) as s:
            epoch = await self._claimed(s, params)
            if epoch is not None:
                return epoch
            rec = await self._row(s, run_id)
        raise lease_held(rec)

    async def renew(self, run_id: str, *, owner: str, epoch: int, now: float, ttl: float) -> None:
        """See ``Store.renew``. Unsynced: a renewal lost in a crash ends the lease sooner;
        the epoch does not move."""
        async with self._writing_one(sync=False) as s:
            if await s.run(self.RENEW, (now + ttl, run_id, epoch, owner)) != 1:
                await self._row(s, run_id)
                raise lease_lost(run_id, owner, epoch)

    async def renew_leases(
        self, leases: Sequence[tuple[str, int]], *, owner: str, now: float, ttl: float
    ) -> list[str]:
        """See ``Store.renew_leases``: one unsynced transaction (PostgreSQL: one statement),
        for a worker's every lease, instead of a transaction per run."""
        lost: list[str] = []
        async with self._writing(sync=False) as s:
            for run_id, epoch in leases:
                if await s.run(self.RENEW, (now + ttl, run_id, epoch, owner)) != 1:
                    lost.append(run_id)
        return lost

    async def last_seqs(self, run_ids: Sequence[str]) -> dict[str, int]:
        """See ``Store.last_seqs``: one read transaction (PostgreSQL: one statement)."""
        out: dict[str, int] = {}
        async with self._reading() as s:
            for run_id in run_ids:
                row = await s.one(self.POSITION, (run_id,))
                if row is not None:
                    out[run_id] = row[0]
        return out

    async def release(self, run_id: str, *, owner: str, epoch: int) -> None:
        """See ``Store.release``. Unsynced: a release lost in a crash leaves the lease to
        lapse; the epoch does not move."""
        async with self._writing_one(sync=False) as s:
            await s.run(self.release_sql, (run_id, epoch, owner))

    async def claim_next(self, **options: Unpack[Claiming]) -> list[Claim]:
        """See ``Store.claim_next``."""
        limit, agents = options.get("limit", 1), options.get("agents")
        if limit < 1 or (agents is not None and not agents):
            return []
        owner, now, ttl = options["owner"], options["now"], options["ttl"]
        versions = options.get("fingerprints")
        rows = await self._claim_rows(
            owner=owner, now=now, ttl=ttl, limit=limit, agents=agents, fingerprints=versions
        )
        return [
            Claim(
                run_id=r[0],
                agent=r[1],
                status=r[2],
                epoch=r[3],
                previous_owner=r[4],
                loaded=r[5] if len(r) > 5 else None,  # read in the claim's statement
            )
            for r in rows
        ]
