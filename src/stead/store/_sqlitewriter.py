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
on the loop in a handful of calls (``sqlite._put_batch``).

The thread owns nothing but its queue: it is handed the connection (the store's write
connection, in a transaction the loop opened under the store's write lock) and the lock's
release with each job. It releases the lock as soon as the ``COMMIT`` returned, so a write
waiting for it goes on at once, and tells the loop through ``call_soon_threadsafe``. A store
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

_Job = tuple[
    sqlite3.Connection, Callable[[], None], asyncio.AbstractEventLoop, asyncio.Future[None]
]


class Writer:
    """The writer thread of one store and the connection its batches commit on."""

    __slots__ = ("__weakref__", "_jobs", "_thread", "busy", "db")

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        """The store's write connection from now on (``SQLiteStore._writes``)."""
        self.busy: asyncio.Future[None] | None = None
        """The latest commit handed to the thread (done once it is)."""
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=_serve, args=(self._jobs,), name="stead-sqlite-writer", daemon=True
        )
        self._thread.start()
        weakref.finalize(self, self._jobs.put, None)

    def commit(self, release: Callable[[], None]) -> asyncio.Future[None]:
        """Run ``COMMIT`` of ``db``'s open transaction on the thread, then ``release()``.

        The future is done once the commit is: with the ``sqlite3.Error`` it raised, if it
        did (the transaction then rolled back)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._jobs.put((self.db, release, loop, done))
        self.busy = done
        return done

    def close(self) -> None:
        """Stop the thread, wait for it, close the connection. The caller holds the store's
        write lock, so no commit is under way."""
        self._jobs.put(None)
        self._thread.join()
        self.db.close()


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The thread: commit each job's transaction until told to stop (``None``)."""
    while (job := jobs.get()) is not None:
        db, release, loop, done = job
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
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(_settle, done, failure)
        del db, release, loop, done, failure


def _settle(done: asyncio.Future[None], failure: BaseException | None) -> None:
    if done.done():  # its waiter was cancelled
        return
    if failure is None:
        done.set_result(None)
    else:
        done.set_exception(failure)
