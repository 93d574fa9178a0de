"""Waiting for a condition, not for a guess of how long it takes.

A fixed ``time.sleep`` before an assertion is a bet on the machine's speed: lost under load
(the thing has not happened yet), wasted when quiet. ``until`` polls the condition and
returns as soon as it holds; its ``timeout`` only bounds a wait for something that never
comes, and then names it. ``until_async`` is the same inside an event loop: it sleeps with
``asyncio.sleep``, so the loop's own tasks (a store's listener, a worker, a follower) go on
between the checks, and its check may be a coroutine function (a store read).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def until(check: Callable[[], T], what: str, *, timeout: float = 60.0, every: float = 0.02) -> T:
    """Call ``check`` until it returns something truthy, and return that; fail naming
    ``what`` after ``timeout`` real seconds. For another process's doing: within one event
    loop, use ``until_async`` (or run on a ``VirtualClock``) instead."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(every)  # another process is at work: nothing in this one to wait on


async def until_async(
    check: Callable[[], T | Awaitable[T]],
    what: str,
    *,
    timeout: float = 60.0,  # noqa: ASYNC109 (when to fail, as ``until``: nothing is cancelled)
    every: float = 0.05,
) -> T:
    """``until`` on an event loop: call ``check`` (awaiting what it returns when that is
    awaitable) until the result is truthy, and return it; fail naming ``what`` after
    ``timeout`` real seconds. Every 0.05 s by default: the check is often a store's read."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        value: T = await got if inspect.isawaitable(got) else got
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        await asyncio.sleep(every)
