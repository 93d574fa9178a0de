"""AbortSignal: one cancellation flag threaded through model streams and tool contexts.

It works from both worlds a tool may live in: async code awaits ``wait()``; sync code running
in a thread polls ``aborted`` or blocks on ``wait_sync(timeout)``. Callbacks let an HTTP stream
or a subprocess group be closed the moment the run is cancelled.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable


class AbortSignal:
    """Set once, never cleared. Thread-safe."""

    __slots__ = ("_aborted", "_callbacks", "_event", "_lock", "_reason")

    def __init__(self) -> None:
        self._event: threading.Event | None = None
        """Made by the first ``wait_sync`` only: a run holds one signal for its whole drive,
        and a ``threading.Event`` (a condition, its lock and a waiter list) is about 1 KiB
        that a run which never has a thread wait on it (most) would carry for nothing."""
        self._aborted = False
        """The flag, read without a call: ``aborted`` is asked several times a step."""
        self._lock = threading.Lock()
        self._reason = ""
        self._callbacks: list[Callable[[str], object]] = []

    @property
    def aborted(self) -> bool:
        """True once ``abort`` was called."""
        return self._aborted

    @property
    def reason(self) -> str:
        """Why it was aborted ('' while not)."""
        return self._reason

    def abort(self, reason: str = "aborted") -> None:
        """Set the signal and run the callbacks (once; later calls are no-ops)."""
        with self._lock:
            if self._aborted:
                return
            self._reason = reason
            self._aborted = True
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(reason)

    def add_callback(self, cb: Callable[[str], object]) -> None:
        """Call ``cb(reason)`` on abort (at once if already aborted)."""
        with self._lock:
            if not self._aborted:
                self._callbacks.append(cb)
                return
        cb(self._reason)

    def remove_callback(self, cb: Callable[[str], object]) -> None:
        """Forget ``cb`` (no error if it already ran or was never added)."""
        with self._lock:
            if cb in self._callbacks:
                self._callbacks.remove(cb)

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block a thread until aborted or ``timeout``; True if aborted."""
        with self._lock:  # made and set under the lock: an abort is never missed
            if self._aborted:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    async def wait(self) -> str:
        """Wait (async) until aborted; returns the reason."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str] = loop.create_future()

        def settle(reason: str) -> None:
            if not fut.done():
                fut.set_result(reason)

        def wake(reason: str) -> None:
            loop.call_soon_threadsafe(settle, reason)

        self.add_callback(wake)
        try:
            return await fut
        finally:
            # A waiter cancelled before the abort must not leave its callback behind: a long
            # run waits on the signal once per turn.
            self.remove_callback(wake)
