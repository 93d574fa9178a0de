"""AbortSignal: set once, wakes async and sync waiters, runs callbacks, leaks nothing."""

from __future__ import annotations

import asyncio
import threading

from stead import AbortSignal


async def test_async_waiters_wake_with_the_reason() -> None:
    sig = AbortSignal()
    waiter = asyncio.ensure_future(sig.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    threading.Thread(target=sig.abort, args=("stop",)).start()
    assert await asyncio.wait_for(waiter, timeout=10) == "stop"
    assert sig.aborted and sig.reason == "stop"
    sig.abort("again")  # set once
    assert sig.reason == "stop"


async def test_cancelled_waiters_leave_no_callbacks() -> None:
    sig = AbortSignal()
    for _ in range(100):
        waiter = asyncio.ensure_future(sig.wait())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
    assert sig._callbacks == []


def test_sync_wait_and_late_callbacks() -> None:
    sig = AbortSignal()
    assert sig.wait_sync(0.01) is False
    seen: list[str] = []
    sig.add_callback(seen.append)
    sig.abort("done")
    sig.add_callback(seen.append)  # added after the abort: runs at once
    assert sig.wait_sync(0) is True
    assert seen == ["done", "done"]
