"""``at_first_wait``: ``await call`` plus a hook once the call is under way.

The run loop's ``mid_model_call`` crash point rides on it, so it must fire exactly once (at
the call's first wait, or when a call that never waits returns), and be transparent
otherwise: the call's result, its exception and a cancel of the awaiting task all pass
through as with a plain ``await``.
"""

from __future__ import annotations

import asyncio

import pytest

from stead.runtime.loop._first_wait import at_first_wait


async def test_a_call_that_never_waits_fires_the_hook_once_when_it_returns() -> None:
    seen: list[str] = []

    async def call() -> int:
        seen.append("ran")
        return 7

    assert await at_first_wait(call(), lambda: seen.append("hook")) == 7
    assert seen == ["ran", "hook"]


async def test_the_hook_fires_at_the_first_wait_before_the_call_ends() -> None:
    seen: list[str] = []
    go = asyncio.Event()

    async def call() -> str:
        seen.append("sent")
        await go.wait()
        await asyncio.sleep(0)
        seen.append("answered")
        return "reply"

    task = asyncio.ensure_future(at_first_wait(call(), lambda: seen.append("hook")))
    await asyncio.sleep(0)
    assert seen == ["sent", "hook"]
    go.set()
    assert await task == "reply"
    assert seen == ["sent", "hook", "answered"]


async def test_an_exception_of_the_call_passes_through() -> None:
    async def call() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad reply")

    hooks: list[int] = []
    with pytest.raises(ValueError, match="bad reply"):
        await at_first_wait(call(), lambda: hooks.append(1))
    assert hooks == [1]


async def test_a_cancel_of_the_awaiting_task_reaches_the_call() -> None:
    cleaned: list[str] = []
    started = asyncio.Event()

    async def call() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append("call saw the cancel")

    task = asyncio.ensure_future(at_first_wait(call(), lambda: None))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["call saw the cancel"]


async def test_a_call_that_handles_the_cancel_returns_its_answer() -> None:
    async def call() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "stopped cleanly"
        return "never"

    task = asyncio.ensure_future(at_first_wait(call(), lambda: None))
    await asyncio.sleep(0)
    task.cancel()
    assert await task == "stopped cleanly"
