"""Progress from afar: a model call an executor performs streams its
provisional text back to the run's owner, and from there to ``Runtime(on_progress=...)``.

    executor (Pool)                      store                    run owner (StoreExecutor)
    model delta ─ Forwarder: batch ─→ ledger_progress ─→ follow(): read after the last seq
                  every 50 ms, unsynced   (effect, seq)     ─→ owner's sink (its ProgressWindow)

The owner opens the generation (``ProgressSink.begin``) when it dispatches the call, so
generations, resets and the window's gaps are the owner's as for a call made in process;
the frames of one call keep the executor's order. Lossy, as progress is: a batch the store
refused is dropped (the follower counts the hole in the executor's sequence, ``missed``), a
crash loses what was not written. Only the settled message is durable: the follower stops
when the call settles, and the pool deletes the call's frames then.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable

from stead.core.progress import ProgressSink, ProgressWindow
from stead.errors import StoreError
from stead.store import Ledger, progress_frames, publish_progress

log = logging.getLogger("stead.executor")


def _drop(text: str) -> None:
    return None


def _nothing(count: int) -> None:
    return None


def far_sink(
    progress: ProgressSink, run_id: str, turn_index: int
) -> tuple[Callable[[str], None], Callable[[int], None]]:
    """A new generation of the owner's window for a call made far away: its delta sink, and
    what to call with the number of frames lost on the way (the window skips that many
    sequence numbers, when it is a ``ProgressWindow``)."""
    sink = progress.begin(run_id, turn_index)
    if not isinstance(progress, ProgressWindow):
        return sink, _nothing
    generation = progress.generation(run_id)
    return sink, functools.partial(progress.skip, run_id, generation)


class _Stream:
    """One model call's deltas on their way to the store."""

    def __init__(self, owner: Forwarder, effect_id: str) -> None:
        self._owner = owner
        self.effect_id = effect_id
        self._pending: list[str] = []
        self._next = 0
        self._task: asyncio.Future[None] | None = None
        self._dropped = False
        self._writing = False
        """A batch is on its way to the store (``close`` waits for it, never cancels it)."""
        self._closing = False

    def add(self, text: str) -> None:
        loop = self._owner._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._add, text)

    def _add(self, text: str) -> None:
        if self._dropped:  # handed over as the call ended: its settle is on its way
            return
        self._pending.append(text)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._soon())

    async def _soon(self) -> None:
        # Deltas that came while a batch was being written go next (close() writes them
        # itself once it has begun).
        while self._pending and not self._closing:
            await asyncio.sleep(self._owner.every)
            self._writing = True
            try:
                await self._flush()
            finally:
                self._writing = False

    async def _flush(self) -> None:
        texts, self._pending = self._pending, []
        first, self._next = self._next, self._next + len(texts)
        try:
            await self._write(first, texts)
        except StoreError as exc:  # lossy by design: the settled message is what counts
            log.debug("progress of %s dropped: %s", self.effect_id, exc)

    async def _write(self, first: int, texts: list[str]) -> None:
        await publish_progress(
            self._owner.ledger, self.effect_id, first, texts, now=self._owner.clock()
        )

    async def close(self) -> None:
        """Write what is left. A batch still waiting out its interval is cancelled and
        written here at once; one already on its way is awaited: cancelling it lost its
        frames (taken from ``_pending``, its sequence numbers spent), a hole in the owner's
        sequence where the call had ended normally."""
        await asyncio.sleep(0)  # deltas handed over with call_soon_threadsafe
        self._closing = True
        task = self._task
        if task is not None and not task.done():
            if self._writing:
                await task
            else:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._flush()

    def drop(self) -> None:
        """Write nothing more (the call is over before its first batch)."""
        self._dropped = True
        self._pending = []
        if self._task is not None:
            self._task.cancel()

    @property
    def wrote(self) -> bool:
        return self._next > 0


class Forwarder:
    """A pool's ``ProgressSink``: the deltas of the model calls it performs, written to the
    store in batches for their runs' owners. ``performing(run, effect)`` says which call a
    run's next ``begin`` belongs to (a run makes one model call at a time)."""

    def __init__(
        self, ledger: Ledger, *, clock: Callable[[], float] = time.time, every: float = 0.05
    ) -> None:
        self.ledger = ledger
        self.clock = clock
        self.every = every
        self._keys: dict[str, str] = {}
        self._streams: dict[str, _Stream] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        """The pool's loop (deltas may come from a provider's thread)."""

    def performing(self, run_id: str, effect_id: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._keys[run_id] = effect_id

    def begin(self, run_id: str, turn_index: int) -> Callable[[str], None]:
        effect_id = self._keys.get(run_id)
        if effect_id is None:
            return _drop
        stream = self._streams[effect_id] = _Stream(self, effect_id)
        return stream.add

    async def finish(self, run_id: str, effect_id: str) -> bool:
        """Write what is left of the call's deltas (before its settle); whether it wrote any.

        A call that ends before its first batch was written (within ``every``) writes none:
        its settle comes next, and the owner's follower, which reads ``every`` after the
        dispatch at the soonest and stops at the settle, would not read them. That spares
        a fast call two transactions (the batch, and deleting it after the settle)."""
        if self._keys.get(run_id) == effect_id:
            del self._keys[run_id]
        stream = self._streams.pop(effect_id, None)
        if stream is None:
            return False
        if stream.wrote:
            await stream.close()
        else:
            stream.drop()
        return stream.wrote


class Follower:
    """The owner's side of one call: feeds the executor's frames to ``sink`` in order until
    cancelled (the call settled). Reads every 50 ms while frames come, backing off to half a
    second while none do."""

    def __init__(
        self,
        ledger: Ledger,
        effect_id: str,
        sink: Callable[[str], None],
        holes: Callable[[int], None] = _nothing,
    ) -> None:
        """``holes(n)``: n frames of the executor's sequence never came (the owner's window
        skips as many sequence numbers: ``far_sink``)."""
        self._ledger = ledger
        self._effect_id = effect_id
        self._sink = sink
        self._holes = holes
        self.last = -1
        """The last sequence fed to the sink."""
        self.missed = 0
        """Frames of the executor's sequence that never arrived (holes)."""

    async def run(self) -> None:
        pause = 0.05
        while True:
            await asyncio.sleep(pause)  # the executor writes a batch every 50 ms at most
            try:
                got = await progress_frames(self._ledger, self._effect_id, self.last)
            except StoreError:
                got = []
            for seq, text in got:
                if seq > self.last + 1:
                    self.missed += seq - self.last - 1
                    self._holes(seq - self.last - 1)
                self.last = seq
                with contextlib.suppress(Exception):  # a listener's failure is the window's
                    self._sink(text)
            pause = 0.05 if got else min(pause * 1.5, 0.5)
