"""The execution ledger on the SQL stores (migration 0004_ledger), written once for both.

One row per effect key in ``ledger_keys`` (its origin, acceptance or tombstone, is fixed by
the key's primary key: the database refuses the other one ever after), the key's events in
``ledger_events``, and the executors' leases in ``executors``. The row keeps the fold of the
events (phase, epoch, holder, position), so every transition of ``core/ledger.py`` is one
conditional ``UPDATE`` of the row whose ``WHERE`` is the check (the phase it must be in, the
epoch it must be written under): a stale executor's settle changes nothing, decided in the
write's own statement, under the row lock, never read-then-write. The event is inserted in the
same transaction, at the position the ``UPDATE`` returned.

A key is *orphaned* when it is held (claimed or started) by an executor whose lease lapsed:
its row in ``executors`` is gone or expired. Another executor serving the queue takes it over
in one transaction (``restarted`` then ``claimed``; a non_idempotent tool that had started is
settled ``tool_unknown`` instead of run twice, ``core.ledger.recovery_of``).

Dialects differ in little: the transaction (SQLite's ``BEGIN IMMEDIATE``; an explicit
transaction on a pooled PostgreSQL connection), the row lock of a claim (``FOR UPDATE SKIP
LOCKED``), and notices: PostgreSQL ``NOTIFY``-s a settle (key and position on the run's
effects channel, never the outcome) and new work (on the queue's channel), SQLite polls. A
notice is only a wake-up: ``wait_settled`` re-reads, and polls besides, through the stores'
``Watcher``, so a lost notice or a dropped LISTEN connection costs at most a poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

from stead.core.ledger import LEDGER_KINDS, LedgerEvent, Phase
from stead.errors import DispatchRejected, RunNotFound, StoreError
from stead.store.ledger import _limits
from stead.store.ledger._recovery import ending
from stead.store.sql import Row, Session, SQLStore, Watcher

KEY_COLUMNS = "phase, epoch, executor, position, outcome, cancel, run_id"
_LIVE = (
    "EXISTS (SELECT 1 FROM executors x WHERE x.executor_id = k.executor AND x.lease_expires_at > ?)"
)
"""Whether the key's holder's lease is live at ``now`` (the one parameter)."""
OPEN = "('accepted', 'claimed', 'started')"
SETTLE_MARK = f"CASE WHEN phase IN {OPEN} THEN 0 ELSE position END"
_IN = "effect_id IN "
"""A key's settle mark (``Ledger._marks``)."""
READ = (
    f"SELECT {', '.join('k.' + c for c in KEY_COLUMNS.split(', '))}, {_LIVE} "
    "FROM ledger_keys k WHERE k.effect_id = ?"
)


@dataclass(frozen=True, slots=True)
class KeyRow:
    """A key's row, read at one moment."""

    phase: Phase
    epoch: int
    executor: str | None
    position: int
    outcome: dict[str, Any] | None
    cancel: bool
    run_id: str
    lease_live: bool


@dataclass(frozen=True, slots=True)
class Claimed:
    """A key an executor now holds: perform ``assignment`` under ``epoch``."""

    effect_id: str
    epoch: int
    assignment: dict[str, Any]
    restarted: bool
    """It had been held before by an executor whose lease lapsed (or that released it)."""
    queue: str = ""
    """The queue it was claimed from."""
    started: bool = False
    """The claim wrote ``started`` too (PostgreSQL's one-statement claim, for every key but
    a non_idempotent tool's): the holder performs it with no ``start`` of its own."""


def key_row(r: Row, live: bool) -> KeyRow:
    return KeyRow(
        phase=r[0],
        epoch=int(r[1]),
        executor=r[2],
        position=int(r[3]),
        outcome=None if r[4] is None else json.loads(r[4]),
        cancel=bool(r[5]),
        run_id=r[6],
        lease_live=live,
    )


def event_data(e: LedgerEvent) -> str:
    """An event's row data: only what it carries."""
    out: dict[str, Any] = {}
    if e.executor is not None:
        out["executor"] = e.executor
    if e.epoch:
        out["epoch"] = e.epoch
    if e.outcome is not None:
        out["outcome"] = e.outcome
    if e.reason:
        out["reason"] = e.reason
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def event_of(kind: str, data: str) -> LedgerEvent:
    """A ledger event from its row; ``StoreError`` for one no writer makes."""
    if kind not in LEDGER_KINDS:
        raise StoreError(f"ledger event of unknown kind {kind!r}")
    d = json.loads(data)
    return LedgerEvent(
        kind=kind,
        executor=d.get("executor"),
        epoch=int(d.get("epoch", 0)),
        outcome=d.get("outcome"),
        reason=str(d.get("reason", "")),
    )


class Change(NamedTuple):
    """One transition of a key, as ``Ledger._transition`` takes it (its arguments but the
    session and the time): what ``_one_transition`` takes."""

    effect_id: str
    event: LedgerEvent
    sets: str
    guard: str
    params: Sequence[Any]


def _held(guard: str, epoch: int, executor: str | None) -> tuple[str, tuple[Any, ...]]:
    """A holder's guard: the epoch, and the executor when named. A claim the database lost
    (``PostgresLedger``) is made again with the same epoch: the name tells the holders
    apart, and the lost claim's is refused as a zombie is by a newer epoch."""
    if executor is None:
        return guard, (epoch,)
    return f"{guard} AND executor = ?", (epoch, executor)


class Ledger:
    """The execution ledger of one store. Built by ``ledger_for``; all times are passed in."""

    LOCK: ClassVar[str] = ""
    """What a claim's select appends to lock the rows it picks (PostgreSQL)."""
    LOCK_LIMIT: ClassVar[str] = ""
    """What a claim's read of a queue's limit appends to serialise claimers (PostgreSQL)."""
    SKIP_FLUSH: ClassVar[str] = ""
    """A statement that lets the rest of its transaction commit without waiting for the disk
    (PostgreSQL; a SQLite transaction says so when it begins)."""

    def __init__(self, store: SQLStore, *, poll_interval: float) -> None:
        self.store = store
        self._queries: dict[str, str] = {}
        self._run_of: dict[str, str] = {}
        """Effect id -> run id, for the keys someone waits on (their notice channel)."""
        self.watch = Watcher(
            self._marks,
            poll_interval=poll_interval,
            on_watch=self._on_watch,
            on_unwatch=self._on_unwatch,
        )

    def _q(self, text: str) -> str:
        q = self._queries.get(text)
        if q is None:
            q = self._queries[text] = text.replace("?", self.store.PARAM)
        return q

    # -- what a dialect supplies ------------------------------------------------------------

    def _tx(self, *, sync: bool = True) -> contextlib.AbstractAsyncContextManager[Session]:
        """One transaction (the ledger's writes are several statements)."""
        return self.store._writing(sync=sync)

    def _reading(self) -> contextlib.AbstractAsyncContextManager[Session]:
        return self.store._reading()

    async def _settled_notice(self, s: Session, run_id: str, effect_id: str, pos: int) -> None:
        """Announce a settle (key and position, never the outcome), at commit."""

    async def _work_notice(self, s: Session, queue: str | None) -> None:
        """Announce that ``queue`` has work, at commit."""

    def _on_watch(self, effect_id: str) -> None:
        """The first waiter on a key came (a dialect with notices listens for it)."""

    def _on_unwatch(self, effect_id: str) -> None:
        self._run_of.pop(effect_id, None)

    async def wait_work(self, queues: Sequence[str], timeout: float) -> None:  # noqa: ASYNC109
        """Until some queue may have work or ``timeout``: SQLite polls at the caller's pace."""
        await asyncio.sleep(max(0.0, timeout))

    async def close(self) -> None:
        """Stop the watcher (and a dialect's listener)."""
        await self.watch.close()

    # -- writes -----------------------------------------------------------------------------

    async def _transition(
        self, s: Session, change: Change, now: float, *, sync: bool = True
    ) -> Row | None:
        """One transition: the row's conditional update (``sets`` then ``guard``, with
        ``params`` for both in order) and, when it matched, the event at the position it
        returned. None when the guard refused it (nothing written). ``sync`` is the
        transaction's here; a dialect that says it in the statement reads it."""
        effect_id, event, sets, guard, params = change
        rows = await s.all(
            self._q(
                f"UPDATE ledger_keys SET {sets}, position = position + 1, updated_at = ? "
                f"WHERE effect_id = ? AND {guard} RETURNING position, run_id, epoch, queue"
            ),
            (*params[: sets.count("?")], now, effect_id, *params[sets.count("?") :]),
        )
        if not rows:
            return None
        row = rows[0]
        if event.kind == "claimed":  # the new epoch is the row's
            event = LedgerEvent(kind="claimed", executor=event.executor, epoch=int(row[2]))
        await s.run(
            self._q(
                "INSERT INTO ledger_events (effect_id, seq, kind, data, created_at) "
                "VALUES (?, ?, ?, ?, ?)"
            ),
            (effect_id, row[0], event.kind, event_data(event), now),
        )
        if event.kind == "settled":
            await self._settled_notice(s, row[1], effect_id, int(row[0]))
        elif event.kind == "restarted":
            await self._work_notice(s, row[3])
        return row

    async def _one_transition(self, change: Change, now: float, *, sync: bool = True) -> bool:
        """``_transition`` alone, in a transaction of its own (PostgreSQL makes it one
        statement); False when the guard refused it. ``sync=False`` commits without waiting
        for the disk (see ``start``)."""
        async with self._single(sync=sync) as s:
            row = await self._transition(s, change, now, sync=sync)
        return row is not None

    def _single(self, *, sync: bool) -> contextlib.AbstractAsyncContextManager[Session]:
        """Where a one-transition write runs (PostgreSQL: an autocommitted statement)."""
        return self._tx(sync=sync)

    async def _origin(
        self, s: Session, key: tuple[str, str, str], origin: str, extra: Sequence[Any], now: float
    ) -> bool:
        """Insert the key's first row and event; False when the key already has one."""
        effect_id, run_id, session_id = key
        rows = await s.all(
            self._q(
                "INSERT INTO ledger_keys (effect_id, run_id, session_id, origin, kind, queue, "
                "assignment, phase, epoch, position, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 1, ?, ?) "
                "ON CONFLICT (effect_id) DO NOTHING RETURNING effect_id"
            ),
            (effect_id, run_id, session_id, origin, *extra, origin, now, now),
        )
        if not rows:
            return False
        await s.run(
            self._q(
                "INSERT INTO ledger_events (effect_id, seq, kind, data, created_at) "
                "VALUES (?, 1, ?, '{}', ?)"
            ),
            (effect_id, origin, now),
        )
        return True

    async def accept(
        self,
        key: tuple[str, str, str],
        *,
        kind: str,
        queue: str | None,
        assignment: dict[str, Any],
        now: float,
    ) -> bool:
        """Accept the assignment (``key`` = effect, run, session ids), idempotent by key:
        True if it is (now or already) accepted, False if the key is aborted.
        ``DispatchRejected`` if the key was accepted with another assignment: a key names
        one effect, and what was accepted under it is what its executor performs."""
        text = json.dumps(assignment, separators=(",", ":"), sort_keys=True)
        async with self._single(sync=True) as s:
            if await self._accept_new(s, key, kind, queue, text, now):
                return True
            row = await s.one(
                self._q("SELECT origin, assignment FROM ledger_keys WHERE effect_id = ?"),
                (key[0],),
            )
        if row is None or row[0] != "accepted":
            return False
        if row[1] != text:
            raise DispatchRejected(
                f"the ledger refuses effect {key[0]}: it was accepted with another assignment"
            )
        return True

    async def _accept_new(
        self, s: Session, key: tuple[str, str, str], kind: str, queue: str | None, text: str,
        now: float,
    ) -> bool:  # fmt: skip
        """A new key's row, its first event and the queue's notice; False if the key exists."""
        if not await self._origin(s, key, "accepted", (kind, queue, text), now):
            return False
        await self._work_notice(s, queue)
        return True

    async def abort(self, key: tuple[str, str, str], *, now: float) -> bool:
        """Tombstone a key never accepted: True if it is (now or already) aborted, False if
        it was accepted (the unique key decides, whichever write came first)."""
        async with self._tx() as s:
            if await self._origin(s, key, "aborted", (None, None, None), now):
                return True
            row = await s.one(
                self._q("SELECT origin FROM ledger_keys WHERE effect_id = ?"), (key[0],)
            )
        return row is not None and row[0] == "aborted"

    async def start(
        self,
        effect_id: str,
        *,
        epoch: int,
        now: float,
        sync: bool = True,
        executor: str | None = None,
    ) -> bool:
        """The holder at ``epoch`` begins the effect; False when it no longer holds it.

        ``sync=False`` for an effect whose recovery does not depend on it (all but a
        non_idempotent tool: ``recovery_of`` restarts them claimed or started): a crash that
        loses the write leaves the key claimed, recovered the same way, and the settle's
        synced commit makes it durable (one log: a flush covers what came before).
        ``executor``: the holder, checked with the epoch (``_held``)."""
        e = LedgerEvent(kind="started", epoch=epoch)
        guard, params = _held("phase = 'claimed' AND epoch = ?", epoch, executor)
        return await self._one_transition(
            Change(effect_id, e, "phase = 'started'", guard, params), now, sync=sync
        )

    async def settle(
        self,
        effect_id: str,
        *,
        epoch: int,
        outcome: dict[str, Any],
        now: float,
        executor: str,
        sync: bool = True,
    ) -> bool:
        """Settle under ``epoch``: False (nothing written) when the epoch is stale, the key
        settled already, or ``executor`` is not its holder; the check is the update's own
        ``WHERE``. The holder is always named and checked with the epoch (``_held``): an
        epoch is a number anyone who read the key knows, so alone it proves nothing.
        ``sync=False`` (all but a non_idempotent tool, as for ``start``):
        a crash that loses it leaves the key held with no task running
        it, which its live holder's heartbeat restarts (``_strays``) and a dead one's
        successor takes over, and the effect runs again; the run's own synced record of
        the outcome flushes the settle before it (one log)."""
        e = LedgerEvent(kind="settled", epoch=epoch, outcome=outcome)
        text = json.dumps(outcome, separators=(",", ":"), sort_keys=True)
        guard, params = _held(f"phase IN {OPEN} AND epoch = ?", epoch, executor)
        return await self._one_transition(Change(
            effect_id, e, "phase = 'settled', outcome = ?", guard, (text, *params)), now,
            sync=sync,
        )  # fmt: skip

    async def release(
        self, effect_id: str, *, executor: str, epoch: int, reason: str, now: float
    ) -> bool:
        """Give a claimed key whose effect never started back to the queue (``restarted``):
        an executor stopping. A started one is not given back: it may have happened, so it
        is recovered by its class once the lease lapses (``claim``)."""
        e = LedgerEvent(kind="restarted", epoch=epoch, reason=reason)
        return await self._one_transition(Change(
            effect_id, e, "phase = 'accepted', epoch = epoch + 1, executor = NULL",
            "phase = 'claimed' AND epoch = ? AND executor = ?",
            (epoch, executor)), now,
        )  # fmt: skip

    async def request_cancel(self, effect_id: str, *, reason: str, now: float) -> KeyRow | None:
        """Ask the key's executor to stop (once); a key nobody holds is settled cancelled
        here. The key's row after it, or None for a key the ledger does not know."""
        e = LedgerEvent(kind="cancel_requested", reason=reason)
        async with self._tx() as s:
            await self._transition(
                s, Change(effect_id, e, "cancel = 1", f"phase IN {OPEN} AND cancel = 0", ()), now
            )
            row = await s.one(
                self._q(f"SELECT {KEY_COLUMNS} FROM ledger_keys WHERE effect_id = ?"),
                (effect_id,),
            )
            if row is not None and row[0] == "accepted":
                out = {"kind": "cancelled", "reason": reason}
                settled = LedgerEvent(kind="settled", epoch=int(row[1]), outcome=out)
                await self._transition(s, Change(
                    effect_id, settled, "phase = 'settled', outcome = ?",
                    "phase = 'accepted' AND epoch = ?", (json.dumps(out), row[1])), now,
                )  # fmt: skip
        return None if row is None else await self.read(effect_id, now=now)

    async def acknowledge(self, effect_id: str, *, now: float) -> bool:
        """The run recorded the outcome: the key is done with. Unsynced: a crash that loses
        it leaves the key settled, as a write that failed would, which loses nothing (the
        run's log has the outcome; a new owner acknowledges what it finds settled)."""
        e = LedgerEvent(kind="acknowledged")
        return await self._one_transition(
            Change(effect_id, e, "phase = 'acknowledged'", "phase = 'settled'", ()), now, sync=False
        )

    async def claim(
        self, executor: str, queues: Sequence[str], *, limit: int, now: float, start: bool = False
    ) -> list[Claimed]:
        """Take up to ``limit`` keys of ``queues`` that are accepted, or orphaned (held by an
        executor whose lease lapsed: taken over with ``restarted`` first), never one of its
        own: an executor knows which it runs (its heartbeat gives up the others, ``_strays``),
        and would abort its own call to take it again. An orphaned non_idempotent tool that
        had started is settled ``tool_unknown``, not returned.
        ``start``: the holder may write ``started`` with the claim where the claim is one
        statement (PostgreSQL, ``Claimed.started``) for every key but a non_idempotent
        tool's, the one class whose recovery the start changes (``start``)."""
        if limit < 1 or not queues:
            return []
        out: list[Claimed] = []
        # Unsynced on SQLite (``SQLiteStore._writing``): the ``started`` after it syncs it.
        async with self._tx(sync=False) as s:
            rows: list[Row] = []
            for queue in queues:
                take = await _limits.room(self, s, queue, now, limit - len(rows))
                if take > 0:
                    rows += await s.all(
                        self._q(
                            "SELECT k.effect_id, k.phase, k.epoch, k.assignment, k.cancel, "
                            f"k.executor, k.queue FROM ledger_keys k WHERE k.phase IN {OPEN} "
                            "AND k.queue = ? AND (k.phase = 'accepted' OR (k.executor <> ? "
                            f"AND NOT {_LIVE})) ORDER BY k.updated_at LIMIT ?{self.LOCK}"
                        ),
                        (queue, executor, now, take),
                    )
            for effect_id, phase, epoch, text, cancel, held_by, queue in rows:
                assignment = json.loads(text)
                restarted = phase != "accepted"
                if restarted:
                    why = f"the lease of executor {held_by} lapsed"
                    back = LedgerEvent(kind="restarted", epoch=int(epoch), reason=why)
                    if not await self._transition(s, Change(
                        effect_id, back, "phase = 'accepted', epoch = epoch + 1, "
                        "executor = NULL", "phase = ? AND epoch = ?", (phase, epoch)), now,
                    ):  # fmt: skip
                        continue
                took = await self._transition(s, Change(
                    effect_id, LedgerEvent(kind="claimed", executor=executor),
                    "phase = 'claimed', epoch = epoch + 1, executor = ?",
                    "phase = 'accepted'", (executor,)), now,
                )  # fmt: skip
                if took is None:
                    continue
                new_epoch = int(took[2])
                out_json = ending(phase, assignment, bool(cancel), f"executor {held_by} stopped")
                if out_json is not None:
                    done = LedgerEvent(kind="settled", epoch=new_epoch, outcome=out_json)
                    await self._transition(s, Change(
                        effect_id, done, "phase = 'settled', outcome = ?",
                        "phase = 'claimed' AND epoch = ?",
                        (json.dumps(out_json), new_epoch)), now,
                    )  # fmt: skip
                    continue
                out.append(Claimed(effect_id, new_epoch, assignment, restarted, queue))
        return out

    async def heartbeat(
        self, executor: str, queues: Sequence[str], *, ttl: float, now: float
    ) -> tuple[set[str], set[str]]:
        """Renew the executor's lease (creating it the first time); (keys it still holds,
        those of them the run asked to cancel)."""
        async with self._tx(sync=False) as s:
            await s.run(
                self._q(
                    "INSERT INTO executors (executor_id, queues, lease_expires_at, started_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (executor_id) DO UPDATE SET "
                    "lease_expires_at = excluded.lease_expires_at, queues = excluded.queues"
                ),
                (executor, ",".join(queues), now + ttl, now),
            )
            rows = await s.all(
                self._q(
                    "SELECT effect_id, cancel FROM ledger_keys "
                    "WHERE executor = ? AND phase IN ('claimed', 'started')"
                ),
                (executor,),
            )
        return {r[0] for r in rows}, {r[0] for r in rows if r[1]}

    async def retire(self, executor: str) -> None:
        """The executor stopped cleanly: its lease ends now."""
        async with self._tx(sync=False) as s:
            await s.run(self._q("DELETE FROM executors WHERE executor_id = ?"), (executor,))

    # -- reads ------------------------------------------------------------------------------

    async def read(self, effect_id: str, *, now: float) -> KeyRow | None:
        """The key's row (None if the ledger never heard of it)."""
        async with self._reading() as s:
            row = await s.one(self._q(READ), (now, effect_id))
        return None if row is None else key_row(row, bool(row[7]))

    def read_sync(self, effect_id: str, *, now: float) -> KeyRow | None:
        """``read`` without an event loop (the port's synchronous ``attach``): one short
        blocking read, for recovery paths only."""
        store: Any = self.store
        with store._reading() as db:
            row = db.execute(READ, (now, effect_id)).fetchone()
        return None if row is None else key_row(row, bool(row[7]))

    async def history(self, effect_id: str) -> list[LedgerEvent]:
        """The key's events, in order."""
        async with self._reading() as s:
            rows = await s.all(
                self._q("SELECT kind, data FROM ledger_events WHERE effect_id = ? ORDER BY seq"),
                (effect_id,),
            )
        return [event_of(k, d) for k, d in rows]

    async def keys(self, run_id: str) -> list[str]:
        """The effect ids of a run's keys, oldest first."""
        async with self._reading() as s:
            rows = await s.all(
                self._q("SELECT effect_id FROM ledger_keys WHERE run_id = ? ORDER BY created_at"),
                (run_id,),
            )
        return [r[0] for r in rows]

    async def serves(self, queue: str, *, now: float) -> bool:
        """Whether an executor with a live lease serves ``queue``."""
        async with self._reading() as s:
            row = await s.one(
                self._q(
                    "SELECT 1 FROM executors WHERE lease_expires_at > ? "
                    "AND (',' || queues || ',') LIKE ?"
                ),
                (now, f"%,{queue},%"),
            )
        return row is not None

    async def _marks(self, effect_ids: Sequence[str]) -> dict[str, int]:
        """Each key's settle mark, what the watcher waits on: 0 while it is open, the
        position of its settle once settled (aborted and acknowledged keys count as
        settled). Its claim and ``started`` wake no waiter, and a settle's notice carries
        its position, so a waiter that read 0 while the key was heard needs no other read."""
        marks = ", ".join("?" * len(effect_ids))
        async with self._reading() as s:
            rows = await s.all(
                self._q(f"SELECT effect_id, {SETTLE_MARK} FROM ledger_keys WHERE {_IN}({marks})"),
                tuple(effect_ids),
            )
        return {r[0]: int(r[1]) for r in rows}

    async def wait_settled(self, effect_id: str, run_id: str, timeout: float) -> int:  # noqa: ASYNC109
        """Until the key settles (a notice or a poll) or ``timeout``: its settle mark then
        (``_marks``; 0 if it is still open). ``KeyError`` for a key the ledger never heard
        of. Waiters on one key share the watcher's reads."""
        self._run_of[effect_id] = run_id
        try:
            return await self.watch.wait_changed(effect_id, 0, timeout)
        except RunNotFound as exc:
            raise KeyError(f"effect {effect_id} was never dispatched to the ledger") from exc


@runtime_checkable
class WithLedger(Protocol):
    """A store that hands the execution ledger its dialect's half."""

    def open_ledger(self, *, poll_interval: float | None = None) -> Ledger:
        """This store's execution ledger; ``poll_interval`` as its dialect sees fit if None."""
        ...


def ledger_for(store: object, *, poll_interval: float | None = None) -> Ledger:
    """The execution ledger of a SQL store (``UserError``-free: the stores are ours)."""
    if not isinstance(store, WithLedger):
        raise StoreError(
            f"the execution ledger needs a SQLite or PostgreSQL store, not {type(store).__name__}"
        )
    return store.open_ledger(poll_interval=poll_interval)
