"""Run one streamed model call so that an ``AbortSignal`` ends it at once.

The call runs as its own task. Aborting the signal (from any thread) cancels that task: the
SDK's stream is closed in its ``finally``, which closes the HTTP response and its connection,
so the server sees the client go away and stops generating (and billing). The caller then
gets ``Aborted`` rather than ``CancelledError``, unless its own task was being
cancelled, which is passed through untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from stead._signal import AbortSignal
from stead.errors import Aborted

T = TypeVar("T")


async def call_abortable(fn: Callable[[], Awaitable[T]], signal: AbortSignal) -> T:
    """Await ``fn()``; abort of ``signal`` cancels it and raises ``Aborted``."""
    if signal.aborted:
        raise Aborted(signal.reason)
    loop = asyncio.get_running_loop()
    task = loop.create_task(_run(fn))

    def on_abort(_reason: str) -> None:
        # From any thread; once the loop is gone the call is long over.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(task.cancel)

    signal.add_callback(on_abort)
    try:
        return await task
    except asyncio.CancelledError:
        me = asyncio.current_task()
        if signal.aborted and (me is None or me.cancelling() == 0):
            raise Aborted(signal.reason) from None
        raise
    finally:
        signal.remove_callback(on_abort)


async def _run(fn: Callable[[], Awaitable[T]]) -> T:
    return await fn()
