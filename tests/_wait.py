"""Waiting for a condition, not for a guess of how long it takes.

A fixed ``time.sleep`` before an assertion is a bet on the machine's speed: lost under load
(the thing has not happened yet), wasted when quiet. ``until`` polls the condition and
returns as soon as it holds; its ``timeout`` only bounds a wait for something that never
comes, and then names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def until(check: Callable[[], T], what: str, *, timeout: float = 60.0, every: float = 0.02) -> T:
    """Call ``check`` until it returns something truthy, and return that; fail naming
    ``what`` after ``timeout`` real seconds. For another process's doing: within one event
    loop, await the condition (or run on a ``VirtualClock``) instead."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(every)  # another process is at work: nothing in this one to wait on
