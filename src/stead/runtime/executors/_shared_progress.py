"""Streamed text shared through the store, for a watcher in another process
(``stead runs watch``, a dashboard of a ``stead serve`` that does not drive the run).

    driving process                         store                      watcher (any process)
    ProgressWindow ─ ProgressShare: batch ─→ ledger_progress ─→ Runtime.follow: the turn's
                     every 50 ms, unsynced   ("run:RUN:TURN", seq)    frames after the last seq

The same table and batching as progress from afar (``_far_progress``): provisional and lossy
(a crash loses what was not written; only the recorded reply is durable). A run's frames are
kept under one key per turn; a turn's key is forgotten once the run streams a later turn,
and every key left when the sharing Runtime closes (a killed process leaves its last turn's
text, one reply's worth, until a prune finds no live writer behind it:
``stead.store.lifecycle.sweep_shared_progress``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from stead.core.progress import ProgressFrame
from stead.errors import StoreError
from stead.runtime.executors._far_progress import Forwarder, _Stream
from stead.store import Ledger, forget_progress

log = logging.getLogger("stead.runtime")


def share_key(run_id: str, turn_index: int) -> str:
    """The ``ledger_progress`` key of a run's turn's shared text."""
    return f"run:{run_id}:{turn_index}"


class ProgressShare(Forwarder):
    """A listener of a Runtime's ``ProgressWindow`` writing each run's streamed text to the
    store, in batches, for watchers in other processes (``Runtime(share_progress=True)``)."""

    def __init__(self, ledger: Ledger, *, clock: Callable[[], float], every: float = 0.05) -> None:
        super().__init__(ledger, clock=clock, every=every)
        self._turns: dict[str, str] = {}
        """Each run's key now streaming."""
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, frame: ProgressFrame) -> None:
        if self._loop is None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:  # a frame from a provider's own thread, before any other
                return
        key = share_key(frame.run_id, frame.turn_index)
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream(self, key)
            old = self._turns.get(frame.run_id)
            self._turns[frame.run_id] = key
            if old is not None:
                self._loop.call_soon_threadsafe(self._retire, old)
        stream.add(frame.text)

    def _retire(self, key: str) -> None:
        stream = self._streams.pop(key, None)
        task = asyncio.ensure_future(self._forget(key, stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forget(self, key: str, stream: _Stream | None) -> None:
        if stream is not None:
            await stream.close()
        try:
            await forget_progress(self.ledger, key)
        except StoreError as exc:  # lossy by design: a row left behind is one reply's text
            log.debug("shared progress of %s not forgotten: %s", key, exc)

    async def close(self) -> None:
        """Forget every key still held (the runs' replies are in their logs)."""
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task
        for key in list(self._streams):
            await self._forget(key, self._streams.pop(key))
