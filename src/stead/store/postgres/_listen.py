"""One ``LISTEN`` connection per PostgreSQL store, listening to the channels someone waits on.

Every append notifies its run's own channel, so a notice reaches only the processes that
wait on that run (PostgreSQL delivers a notice to every backend listening on its channel;
one shared channel would make every worker read every append of the fleet). The set of
channels changes as waiters come and go: the listener applies ``LISTEN``/``UNLISTEN`` between
notices, then tells the store which channels it just started hearing, because a change made
before that could not be heard and must be re-read.

A dropped connection is re-established with backoff; after each (re)connect the store is
told that anything may have changed. TCP keepalives notice a server that vanished silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import psycopg
from psycopg import sql

from stead.store.sql import stop_task

log = logging.getLogger("stead.store")


class Listener:
    """Holds the LISTEN connection; ``want`` / ``drop`` change what it listens to."""

    def __init__(
        self,
        url: str,
        *,
        on_notice: Callable[[str, str], None],
        on_listening: Callable[[set[str] | None], None],
    ) -> None:
        """``on_notice(channel, payload)``; ``on_listening(channels)`` after new channels are
        heard, ``on_listening(None)`` after a (re)connect (everything may have changed)."""
        self._url = url
        self._on_notice = on_notice
        self._on_listening = on_listening
        self._want: set[str] = set()
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.connected = False
        """Whether the connection is up and listening to what was wanted last time."""
        self._have: set[str] = set()
        """The channels the connection has LISTENed to (while ``connected``)."""

    def listening(self, channel: str) -> bool:
        """Whether ``channel`` is heard now and stays so: a notice on it from here on is
        delivered (until a reconnect, which ``on_listening(None)`` tells)."""
        return self.connected and channel in self._have and channel in self._want

    def want(self, channel: str) -> None:
        """Listen to ``channel`` (soon; ``on_listening`` says when)."""
        if channel not in self._want:
            self._want.add(channel)
            self._poke.set()
        self.start()

    def drop(self, channel: str) -> None:
        """Stop listening to ``channel``."""
        if channel in self._want:
            self._want.discard(channel)
            self._poke.set()

    def start(self) -> None:
        """Run the listener (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        """Stop listening and close the connection."""
        await stop_task(self._task)
        self._task = None

    async def _run(self) -> None:
        delay = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url,
                    autocommit=True,
                    application_name="stead-listen",
                    keepalives=1,
                    keepalives_idle=10,
                    keepalives_interval=5,
                    keepalives_count=3,
                )
            except psycopg.Error as exc:
                log.warning("LISTEN connection failed (retrying in %.1fs): %s", delay, exc)
            else:
                try:
                    async with conn:
                        await self._serve(conn)
                except psycopg.Error as exc:
                    log.warning("LISTEN connection dropped (reconnecting): %s", exc)
                finally:
                    self.connected = False
                delay = 0.1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _serve(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        have = self._have = set()
        first = True
        while True:
            self._poke.clear()  # a change from here on pokes the drain below at once
            want = set(self._want)
            added = want - have
            for channel in sorted(added):
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            for channel in sorted(have - want):
                await conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)))
            have = self._have = want
            self.connected = True
            if first:
                self._on_listening(None)
                first = False
            elif added:
                self._on_listening(added)
            await self._drain(conn)

    async def _drain(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        """Deliver notices until someone wants the channels changed."""
        notices = conn.notifies()
        poked = asyncio.ensure_future(self._poke.wait())
        step: asyncio.Future[psycopg.Notify] | None = None
        try:
            while not poked.done():
                step = asyncio.ensure_future(anext(notices))
                await asyncio.wait({step, poked}, return_when=asyncio.FIRST_COMPLETED)
                if step.done():
                    notice = step.result()
                    self._on_notice(notice.channel, notice.payload)
        finally:
            poked.cancel()
            if step is not None and not step.done():
                # Waiting for the socket to be readable: safe to abandon, nothing was read.
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await step
            await notices.aclose()
