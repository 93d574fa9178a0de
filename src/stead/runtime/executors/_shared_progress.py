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

Each model call attempt is a stream of its own under its turn's key
(``stead.store.ledger._shared``): its first batch replaces whatever the key held, so the
process that takes a killed writer's run over and streams the turn again, or a retried call
here, reaches a watcher from its first frame, the text shown before declared void.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

from stead.core.progress import ProgressFrame
from stead.errors import StoreError
from stead.runtime.executors._far_progress import Forwarder, _Stream
from stead.store import Ledger, forget_progress, open_shared_progress

log = logging.getLogger("stead.runtime")


def share_key(run_id: str, turn_index: int) -> str:
    """The ``ledger_progress`` key of a run's turn's shared text."""
    return f"run:{run_id}:{turn_index}"


class _SharedStream(_Stream):
    """One turn's shared text, written as the stream of the model call attempt now
    streaming it (``generation``: the window's)."""

    def __init__(self, owner: ProgressShare, key: str, generation: int) -> None:
        super().__init__(owner, key)
        self._writer = owner.writer
        self.generation = generation
        """The attempt whose frames are added now (set in the thread that adds them)."""
        self._stream = f"{owner.writer}.{generation}"
        """The stream the next batch belongs to."""
        self._opened = ""
        """The stream the store holds under the key (once its first batch was written)."""

    def restart(self, generation: int) -> None:
        """A new attempt at the turn (on the loop, in order with the frames): its frames
        are a new stream, from sequence 0, and those of the last attempt not yet written
        are dropped."""
        self._pending, self._next = [], 0
        self._stream = f"{self._writer}.{generation}"

    async def _write(self, first: int, texts: list[str]) -> None:
        if not texts:
            return
        if self._opened == self._stream:
            await super()._write(first, texts)
            return
        stream = self._stream
        await open_shared_progress(
            self._owner.ledger, self.effect_id, stream, first, texts, now=self._owner.clock()
        )
        self._opened = stream


class ProgressShare(Forwarder):
    """A listener of a Runtime's ``ProgressWindow`` writing each run's streamed text to the
    store, in batches, for watchers in other processes (``Runtime(share_progress=True)``)."""

    def __init__(self, ledger: Ledger, *, clock: Callable[[], float], every: float = 0.05) -> None:
        super().__init__(ledger, clock=clock, every=every)
        self.writer = uuid.uuid4().hex[:16]
        """Names this writer's streams (with the attempt's generation), apart from any
        other process's that streamed or will stream the same turn."""
        self._turns: dict[str, str] = {}
        """Each run's key now streaming."""
        self._shared: dict[str, _SharedStream] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, frame: ProgressFrame) -> None:
        if self._loop is None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:  # a frame from a provider's own thread, before any other
                return
        key = share_key(frame.run_id, frame.turn_index)
        stream = self._shared.get(key)
        if stream is None:
            stream = self._shared[key] = _SharedStream(self, key, frame.generation)
            old = self._turns.get(frame.run_id)
            self._turns[frame.run_id] = key
            if old is not None:
                self._loop.call_soon_threadsafe(self._retire, old)
        elif stream.generation != frame.generation:
            # A run's frames come from one model call at a time, so this thread alone sets it.
            stream.generation = frame.generation
            self._loop.call_soon_threadsafe(stream.restart, frame.generation)
        stream.add(frame.text)

    def _retire(self, key: str) -> None:
        stream = self._shared.pop(key, None)
        task = asyncio.ensure_future(self._forget(key, stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forget(self, key: str, stream: _SharedStream | None) -> None:
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
        for key in list(self._shared):
            await self._forget(key, self._shared.pop(key))
