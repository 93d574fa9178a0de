"""A future of the running event loop that resolves when an ``AbortSignal`` is aborted.

The signal may be aborted from any thread (a worker thread's tool, a keeper callback): its
callback hands the result to the loop (``call_soon_threadsafe``). That callback is one
``_Waker`` object a run, where two closures and their three cells were.
"""

from __future__ import annotations

import asyncio

from stead._signal import AbortSignal


class _Waker:
    __slots__ = ("fut", "loop")

    def __init__(self, fut: asyncio.Future[str], loop: asyncio.AbstractEventLoop) -> None:
        self.fut, self.loop = fut, loop

    def __call__(self, reason: str) -> None:
        self.loop.call_soon_threadsafe(self.settle, reason)

    def settle(self, reason: str) -> None:
        if not self.fut.done():
            self.fut.set_result(reason)


def abort_future(signal: AbortSignal) -> asyncio.Future[str]:
    """A future of this loop resolved with the abort's reason (soon after it, if the signal
    is aborted already)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[str] = loop.create_future()
    signal.add_callback(_Waker(fut, loop))
    return fut
