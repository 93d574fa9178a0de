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

A crash between a batch's commit and the callers' wake-up loses nothing acknowledged: nothing
was acknowledged yet, and what committed is in the log (the session that wrote it reloads it
when it resumes). ``after_batch`` is the seam the test of that SIGKILLs a process at.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from stead.errors import StoreError

Write = Callable[[Any], Awaitable[None]]
"""Write one append on its own (its refusal raised)."""
WriteMany = Callable[[Sequence[Any]], Awaitable[list[BaseException | None]]]
"""Write a batch in one transaction; each member's refusal, or None when it was written.
Raises when the transaction as a whole failed (nothing of it written)."""
AfterBatch = Callable[[Sequence[str]], None]
"""``after_batch(run_ids)``: called once a batch has committed, before its callers return."""
CROWD = 64
"""Queued appends alone that are written as batches after the latest sign of other runs
appending (see "A queued append alone" above)."""


class GroupCommit:
    """Collects appends into batches for one store (see the module docstring)."""

    __slots__ = (
        "_many",
        "_one",
        "_queue",
        "after_batch",
        "batches",
        "crowd",
        "last",
        "lone_in_many",
        "task",
    )

    def __init__(self, one: Write, many: WriteMany, *, lone_in_many: bool = False) -> None:
        self._one = one
        self._many = many
        self.lone_in_many = lone_in_many
        """Whether a queued append alone is written by ``many`` while ``crowd`` is not zero."""
        self.crowd = 0
        """How many more queued appends alone ``many`` writes (see the module docstring)."""
        self.last: str | None = None
        """The run of the latest batched append: the next one of the same run, with no batch
        under way, is written alone."""
        self._queue: list[tuple[Any, asyncio.Future[None]]] = []
        self.task: asyncio.Task[None] | None = None
        """The batch being written, if one is."""
        self.after_batch: AfterBatch | None = None
        """Told of every batch of more than one append once it committed (a test's seam)."""
        self.batches = 0
        """Transactions of more than one append written so far (for tests and metrics)."""

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
        await done

    async def _drain(self) -> None:
        """Write what is queued, batch after batch, until nothing is."""
        batch: list[tuple[Any, asyncio.Future[None]]] = []
        first = True
        try:
            while self._queue:
                batch, self._queue = [m for m in self._queue if not m[1].done()], []
                if not batch:
                    continue  # every caller was cancelled before the write: nothing to do
                if len(batch) > 1 or not first:  # other runs are appending
                    self.crowd = CROWD
                first = False
                if len(batch) == 1 and (not self.lone_in_many or self.crowd <= 0):
                    outcomes = [await self._alone(batch[0][0])]
                else:
                    if len(batch) == 1:
                        self.crowd -= 1
                    outcomes = await self._together([m[0] for m in batch])
                for (_, done), outcome in zip(batch, outcomes, strict=True):
                    if not done.done():
                        if outcome is None:
                            done.set_result(None)
                        else:
                            done.set_exception(outcome)
                batch = []
        except BaseException as exc:
            # Not an append's refusal (those are outcomes): the task itself was stopped, e.g.
            # by the loop closing. Nobody may wait forever for a batch that will not come.
            for _, done in batch + self._queue:
                if not done.done():
                    done.set_exception(
                        StoreError(f"the batch this append was in was interrupted ({exc!r})")
                    )
            self._queue = []
            raise
        finally:
            self.task = None

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
        if len(appends) > 1:
            self.batches += 1
            if self.after_batch is not None:
                self.after_batch([a[0] for a in appends])
        return outcomes
