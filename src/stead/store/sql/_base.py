"""The ``Store`` contract every backend honours, and the row codec they share.

The store knows SQL, not agents: it appends encoded events atomically, refuses a stale
sequence (``Conflict``) or a stale owner (``Fenced``) inside the same transaction as the
write, keeps one snapshot per run, and hands out leases. What the events mean is the core's
business.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, Protocol, Required, TypedDict, Unpack

from stead.core.canonical import compact_encoder
from stead.core.event_codec import WRITERS, decode, problem, unstorable_field
from stead.core.events import Event
from stead.core.messages import unstorable
from stead.core.states import CLAIMABLE as _CLAIMABLE
from stead.core.states import RunStatus
from stead.errors import (
    Conflict,
    CorruptEvent,
    Fenced,
    InvalidEvent,
    InvalidInput,
    RunNotFound,
    StoreError,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """The run's row: identity, denormalised status, sequence and lease."""

    run_id: str
    agent: str
    session_id: str
    """Session grouping."""
    correlation_id: str
    """Caller's correlation id."""
    status: str
    """Status after the last append (denormalised for listing)."""
    last_seq: int
    """Sequence of the last event."""
    epoch: int
    """Current fencing epoch (bumped by every claim)."""
    lease_owner: str | None
    """Who holds the lease, if anyone."""
    lease_expires_at: float | None
    """When that lease lapses (seconds since the epoch)."""
    created_at: float
    """Creation time."""
    updated_at: float
    """Last append time."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEvent:
    """One decoded event with its position."""

    seq: int
    """Per-run sequence number, from 1."""
    event: Event
    created_at: float
    """When it was appended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Loaded:
    """What resuming a run needs: its row, its latest snapshot, and the events after it."""

    record: RunRecord
    """The row."""
    snapshot: dict[str, Any] | None
    """The snapshot's state JSON (None when there is none)."""
    snapshot_seq: int
    """The sequence the snapshot covers (0 without one)."""
    tail: list[StoredEvent]
    """Events after ``snapshot_seq``."""


CLAIMABLE = tuple(s.value for s in RunStatus if s in _CLAIMABLE)
"""``stead.core.states.CLAIMABLE`` as the strings the SQL is written with, in table order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """A run ``claim_next`` handed to a worker, under a freshly bumped epoch."""

    run_id: str
    agent: str
    """Its agent's name (the worker drives it with the agent of that name)."""
    status: str
    """Its status when claimed."""
    epoch: int
    """The new fencing epoch; every append of this owner carries it."""
    previous_owner: str | None
    """Who held the (lapsed) lease before, if anyone: a worker that died or hung."""
    loaded: Loaded | None = None
    """The run read in the claim's own statement (its row at the new epoch, snapshot and
    tail), where the store can do that (PostgreSQL): the claimant drives from it instead of
    reading the run again. None: read it (``Store.load``)."""


class Appending(TypedDict, total=False):
    """The keyword options of ``Store.append``: defined once, for the contract and the stores
    that honour it (``append(run_id, events, expected_seq=..., epoch=..., ...)``)."""

    expected_seq: Required[int]
    """The run's last sequence the events follow."""
    epoch: Required[int]
    """The appender's fencing epoch."""
    status: Required[str]
    """The run's status after these events."""
    now: Required[float]
    """When (seconds since the epoch)."""
    snapshot: tuple[int, dict[str, Any]] | None
    """(seq, state) to store alongside; None (the default): none."""
    sync: bool
    """False may skip waiting for the disk, for events whose loss in a crash of the store (a
    power cut; a crash of the PostgreSQL server alone) loses no effect (the next synced commit
    makes them durable too). True by default."""


class Claiming(TypedDict, total=False):
    """The keyword options of ``Store.claim_next``, defined once as ``Appending`` is."""

    owner: Required[str]
    """Who claims (each claim leases the run to it)."""
    now: Required[float]
    """When (seconds since the epoch)."""
    ttl: Required[float]
    """How long the lease lasts, seconds."""
    limit: int
    """How many runs at most (1 by default)."""
    agents: Sequence[str] | None
    """Only runs of these agents; None (the default): any agent's."""
    fingerprints: Sequence[str] | None
    """The agent versions the claimer drives (``stead.core.versions``): a run pinned to
    another version is skipped. None (the default): pins are not looked at."""


class Store(Protocol):
    """The durable home of runs. SQLite and PostgreSQL implement it identically."""

    @property
    def commits_ahead(self) -> bool:
        """Whether a run's commit that only a model call follows is left in flight while the
        model is called (``OwnedRun``: a commit that is a network round trip, PostgreSQL's),
        rather than awaited first (SQLite: a run alone commits on the event loop's own thread,
        so nothing would overlap)."""
        ...

    async def create_run(self, event: Any, *, now: float) -> None:
        """Insert a run and its ``run_created`` event (seq 1). ``Conflict`` if it exists."""

    async def append(
        self, run_id: str, events: Sequence[Event], **options: Unpack[Appending]
    ) -> int:
        """Append atomically after ``expected_seq``; return the new last sequence.

        In one transaction: ``Fenced`` if the run's epoch is not ``epoch``; ``Conflict`` if its
        last sequence is not ``expected_seq`` or a result for the same call already exists.
        The keyword options are ``Appending``'s.
        """
        ...

    async def load(self, run_id: str) -> Loaded:
        """The run's row, latest snapshot and tail. ``RunNotFound`` if absent."""
        ...

    async def read_events(
        self, run_id: str, after: int = 0, *, limit: int | None = None
    ) -> list[StoredEvent]:
        """Events with seq > ``after``, in order; the first ``limit`` of them when given (a
        reader that wants one event does not decode a whole log)."""
        ...

    async def get_run(self, run_id: str) -> RunRecord:
        """The run's row. ``RunNotFound`` if absent."""
        ...

    async def list_runs(self, *, status: str | None = None, limit: int = 100) -> list[RunRecord]:
        """Most recently updated first."""
        ...

    async def run_ids_starting(self, prefixes: Sequence[str], *, limit: int) -> list[str]:
        """The ids of the runs whose id starts with any of ``prefixes`` (as written: ``%``,
        ``_`` and ``\\`` are characters like any), in code point order, the first ``limit``
        of them. A range of the ids index a prefix: a few entries read, however many runs
        there are."""
        ...

    async def claim(
        self, run_id: str, *, owner: str, now: float, ttl: float, takeover_from: str | None = None
    ) -> int:
        """Take the run's lease and return the new (bumped) epoch.

        ``LeaseHeld`` while another owner's lease is live, unless that owner is
        ``takeover_from`` (the caller has proof it is dead).
        """
        ...

    async def renew(self, run_id: str, *, owner: str, epoch: int, now: float, ttl: float) -> None:
        """Extend our lease. ``Fenced`` if someone else claimed the run since."""
        ...

    async def renew_leases(
        self, leases: Sequence[tuple[str, int]], *, owner: str, now: float, ttl: float
    ) -> list[str]:
        """``renew`` for many (run_id, epoch) at once, in one write; return the run ids
        whose lease was lost (another owner claimed it since, or the run is gone), whose
        renewal changed nothing. A worker renews all its runs' leases with this."""
        ...

    async def last_seqs(self, run_ids: Sequence[str]) -> dict[str, int]:
        """Each run's last sequence, from one read (runs that do not exist are left out). A
        worker looks for other writers' appends (a cancel request) to all its runs with this."""
        ...

    async def release(self, run_id: str, *, owner: str, epoch: int) -> None:
        """Drop our lease if we still hold it (no error otherwise)."""
        ...

    async def claim_next(self, **options: Unpack[Claiming]) -> list[Claim]:
        """Claim up to ``limit`` runs nobody holds: queued ones, and ones in ``CLAIMABLE``
        whose lease lapsed or was released; oldest update first.

        Each claim bumps the run's epoch and leases it to ``owner`` until ``now + ttl``, in one
        transaction, so concurrent claimers (processes, machines) never get the same run.
        The keyword options are ``Claiming``'s.
        """
        ...

    async def wait_changed(self, run_id: str, after_seq: int, timeout: float) -> int:  # noqa: ASYNC109
        """Wait until the run's log grows past ``after_seq`` or ``timeout`` passes; return its
        last sequence. A wake-up, not a message: callers re-read the log. (SQLite polls;
        PostgreSQL can LISTEN and poll, so a missed notice delays nothing past the poll.)"""
        ...

    async def wait_claimable(self, timeout: float) -> None:  # noqa: ASYNC109
        """Sleep until a run may have become claimable (created, requeued, released, decided)
        or ``timeout`` seconds pass. A hint only: callers then ``claim_next``."""
        ...

    def bound_waits(self, seconds: float) -> None:
        """Wait at most ``seconds`` in any one blocking wait on the database from now on
        (SQLite: for another process's write lock; PostgreSQL: a statement, a lock, a
        connection's unanswered bytes, a connect), failing with ``StoreError`` instead.
        Only ever lowers them: a store shared by several lease holders keeps the shortest.
        A lease holder calls it with a share of its lease's safety margin, so a wait begun
        just before its local deadline ends while the store still counts the lease as its
        own (``stead.runtime.loop.wait_bound``)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


# -- shared row codec ---------------------------------------------------------------------


def dumps(data: Any) -> str:
    """Compact JSON for rows: no spaces, UTF-8 kept as is (logs are read by people too)."""
    return _ROW_ENCODER(data)


_ROW_ENCODER = compact_encoder(sort_keys=False)


def event_row(
    event: Event, refusal: type[InvalidEvent] = InvalidEvent
) -> tuple[str, int, int | None, str | None, str | bytes]:
    """(kind, version, turn_index, tool_call_id, data) for an insert: data is the event's
    JSON text, or for a large row its compressed bytes (``pack_data``).

    Every row is checked first by the rules ``decode`` reads it back with (``problem``), and
    its text for what UTF-8 cannot encode: what the store accepts, it can read back. A
    refusal raises ``refusal`` (``InvalidEvent``; ``InvalidInput`` for a run's creation,
    which holds only the caller's values) before anything is written. The text is written
    from the event itself as it is checked (``Record.checked``: the same text as the
    encoder's dict through ``dumps``, without building the dict).
    """
    writer = _ROW_WRITERS.get(type(event))
    text = None if writer is None else writer[4](event)  # checked and written in one call
    if writer is None or text is None:
        wrong = problem(event) or ("?", "refused")
        raise refusal(getattr(event, "kind", type(event).__name__), *wrong)
    kind, version, _, enc, _, has_turn, has_call, call_default = writer
    if not text.isascii() and unstorable(text):  # isascii is O(1): most rows stop there
        raise refusal(
            kind,
            unstorable_field(enc(event)),
            "holds text that is not valid Unicode (a lone surrogate), which UTF-8 cannot encode",
        )
    if has_call is None:  # no such field
        call = None
    elif has_call:  # a required field: a string (its check said so)
        call = event.tool_call_id  # type: ignore[union-attr]
    else:  # left out of the row at its default (effect_reconciled's)
        call = event.tool_call_id  # type: ignore[union-attr]
        call = call if isinstance(call, str) and call != call_default else None
    return (
        kind,
        version,
        event.turn_index if has_turn else None,  # type: ignore[union-attr]
        call,
        text if len(text) < PACK_AT else pack_data(text),
    )


def _required(cls: type[Any], name: str) -> bool | None:
    """Whether ``cls`` has a field ``name`` without a default (its record always writes it),
    False when it has one with a default, None when it has none."""
    for f in fields(cls):
        if f.name == name:
            return f.default is MISSING and f.default_factory is MISSING
    return None


def _default(cls: type[Any], name: str) -> Any:
    """The default of ``cls``'s field ``name`` (None where it has none)."""
    found = [f.default for f in fields(cls) if f.name == name and f.default is not MISSING]
    return found[0] if found else None


_ROW_WRITERS: dict[type[Any], tuple[str, int, Any, Any, Any, bool, bool | None, Any]] = {
    cls: (
        *w,
        bool(_required(cls, "turn_index")),
        _required(cls, "tool_call_id"),
        _default(cls, "tool_call_id"),
    )
    for cls, w in WRITERS.items()
}
"""``WRITERS`` with, per class, whether its row's ``turn_index`` column is a required field
(read from the event, no check: the record's check made it an int), and whether its
``tool_call_id`` is one (True), a field with a default (False: the row leaves it out at its
default, and the column is then NULL) or not a field (None), and that default."""
assert all(
    w[5] or not any(f.name == "turn_index" for f in fields(cls)) for cls, w in _ROW_WRITERS.items()
), "a turn_index with a default would be left out of its row: event_row reads it as required"


PACK_AT = 512
"""Event data of this many characters or more is stored compressed (``pack_data``). Below
it a row is small beside its page and its index entries, and zlib's setup would cost more
than the bytes it saves; the rows of a tool turn with short arguments and results are all
below it, so the common append never compresses."""


def pack_data(text: str) -> str | bytes:
    """A large row's data as stored: the zlib stream (level 1) of its UTF-8 text, unless that
    saves less than a tenth (text that does not compress is kept as text).

    JSON tool results, documents and long replies compress to a third or half, which keeps a
    run's rows near the size of its content on both stores (PostgreSQL compresses a value
    itself only when its row passes ~2 KB). The reader tells the two apart by the first
    byte: event data is a JSON object, ``{``; a zlib stream starts with ``x`` (0x78), and its
    Adler-32 checksum makes damage a ``CorruptEvent``, not a different event."""
    raw = text.encode("utf-8")
    packed = zlib.compress(raw, 1)
    return packed if len(packed) * 10 < len(raw) * 9 else text


def unpack_data(data: str | bytes) -> str | bytes:
    """The JSON text of a stored row: ``pack_data`` undone (``zlib.error`` if damaged)."""
    if isinstance(data, bytes) and data[:1] == b"x":
        return zlib.decompress(data)
    return data


def created_row(event: Any) -> tuple[str, int, int | None, str | None, str | bytes]:
    """``event_row`` of a run's ``run_created``: every value in it is the caller's, so a
    refusal is an ``InvalidInput`` (a ``UserError``) naming the argument."""
    return event_row(event, InvalidInput)


_CHECKSUM = "sha256:"


def snapshot_text(state: dict[str, Any]) -> str:
    """A snapshot row's text: ``sha256:<hex of the JSON>``, a newline, the state's JSON.

    A resume relies on the snapshot instead of the rows it covers, so it must be able to
    tell that the snapshot is the one that was written: the checksum is verified on every
    load (``snapshot_state``), and a snapshot that fails it is ignored (the log is folded
    instead, and damage to the log is then found and named). Hashing costs one pass over
    the text, once every ``snapshot_every`` events.
    """
    text = dumps(state)
    return f"{_CHECKSUM}{hashlib.sha256(text.encode('utf-8')).hexdigest()}\n{text}"


def snapshot_state(text: str) -> dict[str, Any] | None:
    """The state of a snapshot row whose checksum holds; None for anything else (no
    checksum, as written by hand or by an older stead; a wrong one; not a JSON object)."""
    head, sep, body = text.partition("\n")
    if not sep or not head.startswith(_CHECKSUM):
        return None
    if hashlib.sha256(body.encode("utf-8")).hexdigest() != head[len(_CHECKSUM) :]:
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def known_key(run_id: str) -> None:
    """``RunNotFound`` for a run id no run can have (not text, or text UTF-8 cannot encode,
    which ``create_run`` refuses): a lookup answers it like any unknown id instead of
    failing in the database driver's encoder."""
    if not isinstance(run_id, str) or unstorable(run_id):
        raise RunNotFound(run_id if isinstance(run_id, str) else repr(run_id))


def decode_row(run_id: str, seq: int, kind: str, version: int, data: str | bytes) -> Event:
    """Decode one row or raise ``CorruptEvent`` naming the run and sequence."""
    try:
        data = unpack_data(data)
    except zlib.error as exc:
        raise CorruptEvent(run_id, seq, f"compressed data is damaged ({exc})") from exc
    try:
        parsed = json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except (ValueError, TypeError) as exc:
        raise CorruptEvent(run_id, seq, f"data is not JSON ({exc})") from exc
    try:
        return decode(kind, version, parsed)
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptEvent(run_id, seq, str(exc)) from exc


def decode_events(
    run_id: str, rows: Sequence[Sequence[Any]], after: int, last_seq: int
) -> list[StoredEvent]:
    """(seq, kind, version, data, created_at) rows after ``after``, checked for gaps up to
    ``last_seq`` and decoded (``CorruptEvent`` names the bad one)."""
    out = []
    expected = after
    for seq, kind, version, data, created in rows:
        expected += 1
        if seq != expected:
            raise StoreError(f"run {run_id}: event seq {expected} is missing (found {seq})")
        out.append(
            StoredEvent(
                seq=seq, event=decode_row(run_id, seq, kind, version, data), created_at=created
            )
        )
    if expected < last_seq:
        raise StoreError(
            f"run {run_id}: the log ends at seq {expected} but the run is at {last_seq}; "
            f"events {expected + 1}..{last_seq} are missing"
        )
    return out


def append_refusal(
    run_id: str, found: Sequence[Any] | None, epoch: int, expected_seq: int
) -> Exception:
    """Why a guarded append (``... WHERE epoch = ? AND last_seq = ?``) changed nothing, from
    the run's (last_seq, epoch) row read afterwards: missing run, stale owner, or stale seq."""
    if found is None:
        return RunNotFound(run_id)
    last_seq, current_epoch = found
    if current_epoch != epoch:
        return Fenced(
            f"run {run_id}: write with epoch {epoch} refused, the run is at epoch "
            f"{current_epoch} (another worker took it over)"
        )
    return Conflict(
        f"run {run_id}: expected to append after seq {expected_seq}, but the log is at "
        f"{last_seq}; reload and decide again"
    )


class Duplicate(Exception):
    """A unique index refused a write: the dialect's driver error, translated, so the shared
    code can say which guarantee it was (a run that exists, a result already recorded)."""


_TRANSIENT_CAUSES = frozenset(
    {"OperationalError", "InterfaceError", "PoolTimeout", "QueryCanceled", "LockNotAvailable"}
)
"""Driver errors a later try may not meet (by class name: psycopg's and sqlite3's
``OperationalError``, a pool that gave no connection in time, a statement or lock timeout),
so that neither driver is imported here."""


def is_transient(exc: BaseException) -> bool:
    """Whether a ``StoreError`` is the store being unreachable, busy or slow (a later try may
    succeed) rather than what it holds being wrong (a corrupt row: every try meets it)."""
    if isinstance(exc, CorruptEvent):
        return False
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, OSError | TimeoutError):
            return True
        if {k.__name__ for k in type(cause).__mro__} & _TRANSIENT_CAUSES:
            return True
        cause = cause.__cause__
    return False
