"""SQLite's writer thread: a batch's ``COMMIT``, and with it the fsync of the WAL, off the loop
when the disk is slow (``Pace``: on a fast one the loop commits it, cheaper).

A ``SQLiteStore`` runs its statements on the event loop's thread, which is right for a run
alone: its commit (one fsync) is cheaper than a hand-off to a thread, and so is a batch's on a
fast disk (``Pace``). With many runs in flight on a slow disk it is not: every batch's fsync
stopped every other run's Python work, so the wall time was the CPU time plus every fsync, one
after the other. ``Writer`` is one thread per
store, started with the first batch that needs it, that runs the ``COMMIT`` of a batch the
loop has written: the ``sqlite3`` module releases the GIL while SQLite commits, so the fsync
overlaps the other runs' work on the loop (and the WAL write SQLite's C code does runs on the
other CPU). Only the ``COMMIT`` goes there, not the batch's statements: each statement the
thread ran would have to take the GIL back from a busy loop (up to the interpreter's switch
interval, 5 ms, each time), while the statements are cheap CPU work in the page cache, done
on the loop in a handful of calls (``_put.put_batch``).

The thread owns nothing but its queue: it is handed the connection (the store's write
connection, in a transaction the loop opened under the store's write lock) and the lock's
release with each job. It releases the lock as soon as the ``COMMIT`` returned, so a write
waiting for it goes on at once, tells the loop through ``call_soon_threadsafe`` (whose
callback settles the commit's future and calls its ``then``: the group tells the members
there), and marks the job's ``Commit`` returned (which the next append on the loop reads to
start the next batch at once: ``stead.store.sql._group``, "Started at once"). A store
that is closed stops and joins it (``close``); one that is dropped unclosed stops it through
``weakref.finalize``, so no thread outlives its store.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import weakref
from collections.abc import Callable


class Commit:
    """A batch's ``COMMIT`` handed to the thread (``Writer.commit``), or, when the batch
    needed no fsync, already done on the loop (``Commit.now``).

    ``returned`` is set on the thread as soon as SQLite's ``COMMIT`` returned and the write
    lock was released, before the loop hears of it: ``GroupCommit`` reads it at each append
    to start the next batch at once, instead of a turn of the loop later (with many runs in
    flight one turn runs a hundred runs' steps: the writer sat idle that long after every
    commit). ``done`` is the loop's future, settled a turn later; ``failure`` is the error
    the commit raised (then rolled back), if any. ``outcomes`` are the members' own
    refusals, known when the batch's statements ran."""

    __slots__ = ("done", "failure", "outcomes", "returned", "then")

    def __init__(self, done: asyncio.Future[None] | None) -> None:
        self.done = done
        self.returned = done is None
        self.failure: BaseException | None = None
        self.outcomes: list[BaseException | None] = []
        self.then: Callable[[Commit], None] | None = None
        """Called on the loop once it hears the commit returned, in the same callback that
        settles ``done`` (``GroupCommit`` tells the members there: a turn of the loop sooner
        than the task awaiting ``done`` would)."""

    @classmethod
    def now(cls, outcomes: list[BaseException | None]) -> Commit:
        """A batch committed on the loop already (no fsync to wait for)."""
        commit = cls(None)
        commit.outcomes = outcomes
        return commit

    async def wait(self) -> None:
        """Until the commit returned on the thread; raises the ``sqlite3.Error`` it failed
        with (nothing of the batch was written)."""
        if self.done is not None:
            await self.done


LOOP_LIMIT = 0.003
"""Seconds a durable batch's ``COMMIT`` on the loop may take on average for batches to go on
committing there (``Pace``). Here (2 vCPUs, bench/in_flight.py at 100 in flight, ``strict``,
a sleep added to each commit on tmpfs) the loop was the better place up to 3-4 ms a commit:
1.8x ideal against the thread's 2.1x at 2 ms, 2.0x against 2.2x at 3 ms, 2.3x against 2.1x
at 5 ms; a fast disk's commit is 0.2-0.5 ms, a loaded one's here 1-2 ms."""
PROBE_AFTER = 32
"""Durable batches that commit on the thread once the loop's commits were too slow, before
one is tried on the loop again (``Pace``)."""


class Pace:
    """Where a durable batch commits: on the loop while the disk is fast, else on the thread.

    On the thread a commit costs its batch a hand-off each way: the thread needs the GIL back
    once SQLite's ``COMMIT`` returned, which a busy loop gives up only at the interpreter's
    switch interval (5 ms), and the loop hears of it at its next turn; meanwhile the appends
    of every run pile up for the next batch, and the runs move in lockstep (bench/in_flight.py,
    100 in flight, ``strict``: batches of 70-90 members, the loop idle half the time, an
    append acknowledged 20 ms after it was made). On the loop a commit costs its fsync and
    nothing else (members told in the turn that committed, batches of ~20, 8 ms), but every
    other run waits meanwhile, which a slow disk makes dear. So a batch commits on the loop
    while the average of the latest ``COMMIT`` times there (each measured around it, on the
    loop: nothing else runs meanwhile; averaged over about eight, each counted as at most
    twice the limit) is at most ``limit`` seconds; above it the next ``PROBE_AFTER`` durable
    batches commit on the thread, then one is tried on the loop again, and its time alone
    decides. A slow disk stalls the loop for one commit in ``PROBE_AFTER + 1``; a disk
    that became fast again is found within as many batches. Counted, not timed, but for the
    ``COMMIT`` itself.

    ``limit = 0`` sends every batch to the thread, ``math.inf`` every one to the loop (tests
    pin a branch so; a disk known to be slow could too)."""

    __slots__ = ("average", "left", "limit", "probing")

    def __init__(self, limit: float = LOOP_LIMIT) -> None:
        self.limit = limit
        self.average = 0.0
        """Of the latest ``COMMIT`` times on the loop (an exponential average, weight 1/8)."""
        self.left = 0
        """Durable batches still to commit on the thread before the loop is tried again."""
        self.probing = False
        """The next commit on the loop is a probe after ``PROBE_AFTER`` on the thread."""

    @property
    def next_on_loop(self) -> bool:
        """Whether the next durable batch would commit on the loop (``on_loop`` not called)."""
        return self.limit > 0 and self.left == 0

    def on_loop(self) -> bool:
        """Whether the next durable batch commits on the loop (a call per batch)."""
        if self.limit <= 0:
            return False
        if self.left > 0:
            self.left -= 1
            self.probing = self.left == 0
            return False
        return True

    def took(self, seconds: float) -> None:
        """A ``COMMIT`` on the loop took ``seconds`` (counted as at most twice the limit: a
        lone spike of a loaded disk moves the average by a fraction of the limit, a few in a
        row send the batches to the thread)."""
        seconds = min(seconds, 2 * self.limit)
        if self.probing:
            self.probing = False
            self.average = seconds
        else:
            self.average += (seconds - self.average) / 8
        if self.average > self.limit:
            self.left = PROBE_AFTER


_Job = tuple[sqlite3.Connection, Callable[[], None], asyncio.AbstractEventLoop, Commit]


class Writer:
    """The writer thread of one store and the connection its batches commit on."""

    __slots__ = ("__weakref__", "_jobs", "_thread", "busy", "db", "idle_waiters")

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        """The store's write connection from now on (``SQLiteStore._writes``)."""
        self.busy: asyncio.Future[None] | None = None
        """The latest commit handed to the thread (done once it is)."""
        self.idle_waiters = 0
        """Writes that wait for the thread to be idle (``SQLiteStore._writer_idle``): while
        one does, an append does not start the next batch itself (it would keep the thread
        busy for ever under load), the group's task does."""
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=_serve, args=(self._jobs,), name="stead-sqlite-writer", daemon=True
        )
        self._thread.start()
        weakref.finalize(self, self._jobs.put, None)

    def commit(self, release: Callable[[], None]) -> Commit:
        """Run ``COMMIT`` of ``db``'s open transaction on the thread, then ``release()``.

        The commit's ``done`` is settled once it returned: with the ``sqlite3.Error`` it
        raised, if it did (the transaction then rolled back)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        commit = Commit(done)
        self._jobs.put((self.db, release, loop, commit))
        self.busy = done
        return commit

    def close(self) -> None:
        """Stop the thread, wait for it, close the connection. The caller holds the store's
        write lock, so no commit is under way."""
        self._jobs.put(None)
        self._thread.join()
        self.db.close()


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The thread: commit each job's transaction until told to stop (``None``)."""
    while (job := jobs.get()) is not None:
        db, release, loop, commit = job
        del job  # hold nothing between jobs: a dropped store's connection is not kept
        failure: BaseException | None = None
        try:
            db.execute("COMMIT")
        except Exception as exc:
            failure = exc
            with contextlib.suppress(Exception):
                if db.in_transaction:
                    db.execute("ROLLBACK")
        finally:
            release()
        commit.failure = failure
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_settle, commit)
        # After the release (the next batch may begin at once) and after the loop was told
        # (whoever sees it finds the loop's callback queued: a test turns the loop from there).
        commit.returned = True
        del db, release, loop, commit, failure


def _settle(commit: Commit) -> None:
    """On the loop, once the thread's commit returned: ``done`` settled, ``then`` called."""
    done, then = commit.done, commit.then
    if done is not None and not done.done():  # done: its waiter was cancelled
        if commit.failure is None:
            done.set_result(None)
        else:
            done.set_exception(commit.failure)
    if then is not None:
        commit.then = None  # nothing held once told
        then(commit)
