"""SQLite's writer thread: a batch's ``COMMIT``, and with it the fsync of the WAL, off the loop.

A ``SQLiteStore`` runs its statements on the event loop's thread, which is right for a run
alone: its commit (one fsync) is cheaper than a hand-off to a thread. With many runs in flight
it is not: every batch's fsync (0.5-1 ms) stopped every other run's Python work, so the wall
time was the CPU time plus every fsync, one after the other. ``Writer`` is one thread per
store, started with the first batch that needs it, that runs the ``COMMIT`` of a batch the
loop has written: the ``sqlite3`` module releases the GIL while SQLite commits, so the fsync
overlaps the other runs' work on the loop (and the WAL write SQLite's C code does runs on the
other CPU). Only the ``COMMIT`` goes there, not the batch's statements: each statement the
thread ran would have to take the GIL back from a busy loop (up to the interpreter's switch
interval, 5 ms, each time), while the statements are cheap CPU work in the page cache, done
on the loop in a handful of calls (``_sqliteput.put_batch``).

The thread owns nothing but its queue: it is handed the connection (the store's write
connection, in a transaction the loop opened under the store's write lock) and the lock's
release with each job. It releases the lock as soon as the ``COMMIT`` returned, so a write
waiting for it goes on at once, marks the job's ``Commit`` returned (which the next append
on the loop reads to start the next batch at once: ``stead.store._group``, "Started at
once"), and tells the loop through ``call_soon_threadsafe``. A store
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

    __slots__ = ("done", "failure", "outcomes", "returned")

    def __init__(self, done: asyncio.Future[None] | None) -> None:
        self.done = done
        self.returned = done is None
        self.failure: BaseException | None = None
        self.outcomes: list[BaseException | None] = []

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
        commit.returned = True  # after the release: the next batch may begin at once
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_settle, commit.done, failure)
        del db, release, loop, commit, failure


def _settle(done: asyncio.Future[None] | None, failure: BaseException | None) -> None:
    if done is None or done.done():  # its waiter was cancelled
        return
    if failure is None:
        done.set_result(None)
    else:
        done.set_exception(failure)
