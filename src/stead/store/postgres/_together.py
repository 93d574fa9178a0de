"""Calls made in one turn of the event loop, answered by one statement (``Together``).

A worker that claims a hundred runs starts them in one turn, and when runs move in step
(their model calls end together) they finish in one turn too. Each of their loads and each
release was a round trip of its own and a place in the connection pool, queued ahead of
the runs' appends: with the workers 10 ms from the server, the last run of a claim started a
fifth of a second after the first. ``PostgresStore`` reads a turn's loads with one ``LOAD``
(``_load``) and writes a turn's releases with one statement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from stead.store.postgres._append import UNSYNCED

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Together(Generic[K, V]):
    """Calls by key made in one turn of the loop, answered by one call of ``many`` (a key it
    leaves out gets ``missing``). A failure of ``many`` fails each caller of its batch.
    Each turn's batch is a task of its own, so a call never waits for another batch's
    round trip; a caller cancelled meanwhile is left out, or just not told."""

    __slots__ = ("_batch", "_loop", "_many", "_missing", "_tasks")

    def __init__(self, many: Callable[[list[K]], Awaitable[dict[K, V]]], missing: V) -> None:
        self._many = many
        self._missing = missing
        self._batch: dict[K, list[asyncio.Future[V]]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, key: K) -> V:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[V] = loop.create_future()
        if self._batch is None or self._loop is not loop:  # (a batch of a closed loop: gone)
            self._batch, self._loop = {}, loop
            task = loop.create_task(self._go())  # runs next turn: this turn's calls join
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._batch.setdefault(key, []).append(done)
        return await done

    async def _go(self) -> None:
        batch, self._batch = self._batch or {}, None
        waiting = {k: fs for k, fs in batch.items() if not all(f.done() for f in fs)}
        if not waiting:
            return
        try:
            got = await self._many(list(waiting))
        except BaseException as exc:
            for fs in waiting.values():
                for f in fs:
                    if f.done():
                        continue
                    if isinstance(exc, Exception):
                        f.set_exception(exc)
                    else:  # this task was cancelled (the loop closing): so are its callers
                        f.cancel()
            if not isinstance(exc, Exception):
                raise
            return
        for key, fs in waiting.items():
            for f in fs:
                if not f.done():
                    f.set_result(got.get(key, self._missing))


RENEW_LEASES = (
    "UPDATE runs r SET lease_expires_at = %s FROM unnest(%s::text[], %s::bigint[])"
    " AS h(run_id, epoch) WHERE r.run_id = h.run_id AND r.epoch = h.epoch"
    f" AND r.lease_owner = %s RETURNING r.run_id, {UNSYNCED}"
)
"""Every lease a worker holds renewed in one unsynced statement (``renew_leases``)."""
