"""Group commit: the appends of many runs of one process written in one transaction.

Every commit of an append costs a flush to disk (SQLite: an fsync of the WAL; PostgreSQL: a
WAL flush on the server). With hundreds of runs in flight in one process, most of a step's
wall time was spent waiting for the disk, one run after another. ``GroupCommit`` collects the
appends that arrive in the same turn of the event loop (and, on PostgreSQL, while a batch is
on the wire) and hands them to the dialect as one batch: one transaction, one flush. Each
caller returns only when its batch has committed, so an append that returned is as durable as
before.

**Per run, not per batch.** Each append's fencing and sequence checks stay its own: the
dialect checks each member's guard inside the batch's transaction, writes the members whose
guard holds and reports the others' refusal (``Fenced``, ``Conflict``, ``RunNotFound``) to
them alone. Anything that fails the batch as a whole (a unique index refusing a second result,
a ``before_commit`` hook raising, a database error) rolls it back, and every member is then
written again on its own, so the member at fault gets its error and the others commit.

**A run alone pays nothing.** An append of the same run as the one before, with no batch
under way, is written at once, exactly as without group commit: a single run never waits for
a batch that nobody else would join. Only an append that follows another run's, or arrives
while a batch is being written, joins one.

**A queued append alone.** On PostgreSQL an append alone in its batch is written as when no
batch is under way (one statement). On SQLite (``lone_in_many``) it is written as a batch of
one while other runs appended lately, because SQLite commits a batch on its writer thread:
the fsync then waits there, not on the event loop, where other runs' work goes on. "Lately"
is counted, not timed: a batch of several appends, or one that arrived while another was
being written, sets ``crowd`` to ``CROWD``, and each queued append alone after it counts it
down; at zero (the other runs finished) one is written directly again, which for a process
running one run after another (the first append of each run comes here) is the cheaper way.

**Started at once** (SQLite, ``start``). A batch's commit returns on the writer thread; the
task that wrote it hears of that only on a later turn of the event loop, and with a hundred
runs in flight one turn runs a hundred runs' steps (their model calls end together). For all
that time the thread sat idle and every append made meanwhile waited, then went in one big
batch, whose members were released together, ran their next step together and appended
together again: the runs moved in lockstep, the loop idle while all of them waited on their
model and oversubscribed when they came back (bench/in_flight.py, 100 in flight, ``strict``:
the writer's commit returned ~1 ms after it was handed over and was heard 25-40 ms later).
So the thread also says so on the batch itself (``Started.returned``, set as the commit
returned), and the next append that sees it tells that batch's callers and starts the next
batch, itself in it, there and then (``_advance``): the thread is handed the next commit as
soon as it is free, batches stay small, and runs that arrive apart are released apart. When
the loop hears of the commit (``Started.then``, called from the loop's callback) it does the
same if no append did: the members are told in that turn, not a turn later when the task
awaiting the commit runs; an append made while that task has not run yet starts the next
batch too (``_kick``). The task still does what an append cannot: the first batch after a
pause, a commit that failed (each member then written alone), a member written alone, and
the last batch, once nobody appends. While another write waits for the thread to be idle (a
claim, a lease renewal), an append leaves the next batch to the task, so that the write gets
its turn.

**Committed at once** (SQLite on a fast disk, ``stead.store.sqlite._writer.Pace``): ``start``
may commit the batch before it returns (``returned`` already set); its members are told
there and then. Such a batch is begun only by the task, once a turn of the loop (``start``
declines an ``eager`` one): begun from every append, each append would be a commit.

**Batches on the wire** (PostgreSQL, ``width``). A batch is a round trip, whose answer the
task hears a turn of the loop after it came; the appends made meanwhile waited for all of
that before going out, and were then released together, as one cohort: runs that waited on
one batch moved on in step, their next steps made in one turn of the loop and queued behind
each other's work. With ``width`` above 1, an append that finds every batch task waiting on
the wire starts another task (at most one a turn: the new task is not waiting yet), which
writes what is queued by the next turn as a batch of its own, on another connection of the
pool: at most ``width`` batches are under way at once, and an append made during a round
trip goes out at the next turn instead of after it, so runs come back spread as they
arrived. Each member's guard is checked by the database as ever, so batches on the wire
together never write one run out of order: a run has one append under way at a time (its
handle waits for it before the next); a second writer of it (a person's decision, a cancel)
meets the guard as from another process; and should a caller send a run's next append while
an earlier one is still on the wire, the later one expects the earlier's end, which the
run's row shows only once the earlier committed: refused before that, never written ahead.

A crash between a batch's commit and the callers' wake-up loses nothing acknowledged: nothing
was acknowledged yet, and what committed is in the log (the session that wrote it reloads it
when it resumes). ``after_batch`` is the seam the test of that SIGKILLs a process at.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from stead.errors import StoreError

Write = Callable[[Any], Awaitable[None]]
"""Write one append on its own (its refusal raised)."""
WriteMany = Callable[[Sequence[Any]], Awaitable[list[BaseException | None]]]
"""Write a batch in one transaction; each member's refusal, or None when it was written.
Raises when the transaction as a whole failed (nothing of it written)."""
Start = Callable[[Sequence[Any], bool], "Started | None"]
"""``start(appends, eager)``: write a batch's statements now and hand its commit on (see
"Started at once" above); with ``eager`` it may decline (None, nothing written)."""
AfterBatch = Callable[[Sequence[str]], None]
"""``after_batch(run_ids)``: called once a batch has committed, before its callers return."""
CROWD = 64
"""Queued appends alone that are written as batches after the latest sign of other runs
appending (see "A queued append alone" above)."""


class Started(Protocol):
    """A batch whose statements ran and whose commit is under way (``Start``'s)."""

    outcomes: list[BaseException | None]
    """Each member's refusal, or None (known from the statements)."""
    returned: bool
    """The commit returned (done or failed), as the loop can tell without waiting for it."""
    failure: BaseException | None
    """What the commit failed with, once ``returned`` (nothing of the batch written)."""
    then: Callable[[Any], None] | None
    """Called with it on the loop once the loop heard the commit returned (if set)."""

    async def wait(self) -> None:
        """Until the commit returned; raises what it failed with."""


_Member = tuple[Any, asyncio.Future[None]]


class GroupCommit:
    """Collects appends into batches for one store (see the module docstring)."""

    __slots__ = (
        "_free",
        "_many",
        "_more",
        "_one",
        "_pending",
        "_queue",
        "_start",
        "after_batch",
        "batches",
        "crowd",
        "last",
        "lone_in_many",
        "task",
        "width",
        "writing",
    )

    def __init__(
        self,
        one: Write,
        many: WriteMany,
        *,
        lone_in_many: bool = False,
        start: Start | None = None,
        width: int = 1,
    ) -> None:
        self._one = one
        self._many = many
        self._start = start
        self._pending: tuple[list[_Member], Started] | None = None
        """The batch ``start`` began whose members are not told yet."""
        self.lone_in_many = lone_in_many
        """Whether a queued append alone is written by ``many`` while ``crowd`` is not zero."""
        self.crowd = 0
        """How many more queued appends alone ``many`` writes (see the module docstring)."""
        self.last: str | None = None
        """The run of the latest batched append: the next one of the same run, with no batch
        under way, is written alone."""
        self._queue: list[_Member] = []
        self.task: asyncio.Task[None] | None = None
        """The batch being written, if one is."""
        self.after_batch: AfterBatch | None = None
        """Told of every batch of more than one append once it committed (a test's seam)."""
        self.batches = 0
        """Transactions of more than one append written so far (for tests and metrics)."""
        self.width = width
        """Batches written at once at most (see "Batches on the wire" above)."""
        self._more: set[asyncio.Task[None]] = set()
        """Tasks writing batches besides ``task`` (held here: the loop holds tasks weakly)."""
        self.writing = 0
        """Tasks waiting for a batch they are writing."""
        self._free = False
        """The commit the task awaits was told already (``_advance``) with nothing queued:
        the next append starts the next batch itself (``_kick``), once."""

    async def submit(self, run_id: str, append: Any) -> None:
        """Write ``append`` of ``run_id`` in a batch; return once it is durable.

        Raises the append's own refusal, never another member's. ``SQLStore.append`` calls
        this only when the append would not be alone (another run's append came last, or a
        batch is under way); a run alone it writes itself, at the cost of two comparisons."""
        self.last = run_id
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queue.append((append, done))
        if self.task is None:
            # Starts on the next turn of the loop: the appends made in this turn join it.
            self.task = loop.create_task(self._drain())
        elif self._pending is not None:
            if self._pending[1].returned:
                self._advance()  # the commit under way returned: the next batch starts now
        elif self._free:
            self._kick()  # the commit the task awaits was told already: nothing is under way
        elif self.writing > len(self._more) and len(self._more) + 1 < self.width:
            # Every task waits on the wire: another takes what is queued by the next turn.
            self._more.add(loop.create_task(self._drain(more=True)))
        await done

    async def _drain(self, more: bool = False) -> None:
        """Write what is queued, batch after batch, until nothing is (and, with ``start``,
        until the batch under way is told)."""
        batch: list[_Member] = []
        first = True
        try:
            while self._queue or self._pending is not None:
                if (pending := self._pending) is not None:
                    with contextlib.suppress(Exception):  # the failure is read from it
                        await pending[1].wait()
                    self._free = False
                    if self._pending is pending:  # not told by an append meanwhile
                        batch = pending[0]
                        await self._finish()
                        batch = []
                    continue
                batch, alone = self._take(first)
                if not batch:
                    continue  # every caller was cancelled before the write: nothing to do
                first = False
                if self._start is not None and not alone and self._begin(batch, eager=False):
                    batch = []
                    continue  # told once its commit returned (above, or by ``_advance``)
                self.writing += 1
                try:
                    if alone:
                        outcomes = [await self._alone(batch[0][0])]
                    else:
                        outcomes = await self._together([m[0] for m in batch])
                finally:
                    self.writing -= 1
                _tell(batch, outcomes)
                batch = []
        except BaseException as exc:
            # Not an append's refusal (those are outcomes): the task itself was stopped, e.g.
            # by the loop closing. Nobody may wait forever for a batch that will not come.
            pending_members = [] if self._pending is None else self._pending[0]
            for _, done in batch + pending_members + self._queue:
                if not done.done():
                    done.set_exception(
                        StoreError(f"the batch this append was in was interrupted ({exc!r})")
                    )
            self._queue, self._pending = [], None
            raise
        finally:
            if more:
                self._more.discard(asyncio.current_task())
            else:
                self.task = None

    def _take(self, first: bool) -> tuple[list[_Member], bool]:
        """The queued appends whose callers still wait, as the next batch, and whether its
        one member is written alone (see "A queued append alone" above)."""
        batch, self._queue = [m for m in self._queue if not m[1].done()], []
        if not batch:
            return batch, False
        if len(batch) > 1 or not first:  # other runs are appending
            self.crowd = CROWD
        if len(batch) > 1:
            return batch, False
        if not self.lone_in_many or self.crowd <= 0:
            return batch, True
        self.crowd -= 1
        return batch, False

    def _begin(self, batch: list[_Member], eager: bool) -> bool:
        """Start ``batch`` with ``start``; False when that failed or declined (nothing of
        it written: the caller writes it another way)."""
        assert self._start is not None
        try:
            started = self._start([m[0] for m in batch], eager)
        except Exception:
            return False
        if started is None:
            return False
        if started.returned and started.failure is None:
            self._committed(batch, started.outcomes)  # committed here and now: told at once
            return True
        self._pending = (batch, started)
        if not started.returned:
            started.then = self._returned
        return True

    def _returned(self, started: Started) -> None:
        """From the loop's callback that heard ``started``'s commit return: its members told
        and the next batch started there and then (``_advance``), a turn of the loop before
        the task awaiting the commit would."""
        pending = self._pending
        if pending is not None and pending[1] is started and started.failure is None:
            self._advance()

    async def _finish(self) -> None:
        """Tell the members of the batch under way, whose commit returned: its outcomes,
        or, when the commit failed as a whole, each member's own write's."""
        assert self._pending is not None
        batch, started = self._pending
        self._pending = None
        if started.failure is not None:
            _tell(batch, [await self._alone(m[0]) for m in batch])
        else:
            self._committed(batch, started.outcomes)

    def _advance(self) -> None:
        """From an append, once the commit under way returned: tell its members and start
        the next batch (this append in it) at once, rather than a turn of the loop later,
        when the task hears of the commit. A failed commit, and a batch that would be
        written alone, are left to the task."""
        assert self._pending is not None
        batch, started = self._pending
        if started.failure is not None:
            return
        self._pending = None
        self._committed(batch, started.outcomes)
        if self._queue:
            self._kick()
        else:
            self._free = True

    def _kick(self) -> None:
        """Start what is queued as the next batch, here and now, when nothing is under way
        (``_advance``, or an append while the task awaits a commit told already); a batch
        that would be written alone, or that ``start`` declines, is left to the task (and no
        later append tries again: each try filters the whole queue)."""
        self._free = False
        queued = self._queue
        nxt, alone = self._take(False)
        if nxt and (alone or not self._begin(nxt, eager=True)):
            self._queue = queued  # the task writes it

    async def _alone(self, append: Any) -> BaseException | None:
        try:
            await self._one(append)
        except Exception as exc:
            return exc
        return None

    async def _together(self, appends: list[Any]) -> list[BaseException | None]:
        """One transaction for the batch; if it failed as a whole, each member on its own."""
        try:
            outcomes = await self._many(appends)
        except Exception:
            return [await self._alone(a) for a in appends]
        self._counted(appends)
        return outcomes

    def _counted(self, appends: Sequence[Any]) -> None:
        if len(appends) > 1:
            self.batches += 1
            if self.after_batch is not None:
                self.after_batch([a[0] for a in appends])

    def _committed(self, batch: list[_Member], outcomes: list[BaseException | None]) -> None:
        self._counted([m[0] for m in batch])
        _tell(batch, outcomes)


def _tell(batch: list[_Member], outcomes: list[BaseException | None]) -> None:
    """Each member's caller returns (or raises its own refusal)."""
    for (_, done), outcome in zip(batch, outcomes, strict=True):
        if not done.done():
            if outcome is None:
                done.set_result(None)
            else:
                done.set_exception(outcome)
