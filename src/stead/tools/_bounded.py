"""One attempt of a tool call under its time limit (``@tool(timeout=...)``).

The limit is delivered the way a cancel is: through the signal the handler's ``ToolContext``
carries. Each bounded attempt gets a signal of its own, aborted by the run's (a cancel) or by
its timeout, so ``ctx.run_subprocess`` stops the child's whole process group (SIGTERM, then
SIGKILL after ``cancel_grace``) and an async handler awaiting ``ctx.signal.wait()`` wakes. A
handler that ignores the signal is cancelled after the grace (an async one; a sync one runs
in a thread nothing can stop, and is left to finish on its own, its result unused).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from stead._signal import AbortSignal
from stead.tools._context import ToolContext


class ToolTimedOut(Exception):
    """The attempt ran past the tool's ``timeout``; its text is what the model reads."""


async def run_bounded(
    call: Callable[[ToolContext], Awaitable[Any]], ctx: ToolContext, limit: float
) -> Any:
    """``await call(bounded_ctx)``, aborted through the signal once ``limit`` seconds pass.

    Raises ``ToolTimedOut`` past the limit; a cancel of the run (its signal, or this task's
    cancellation) propagates as it would without a limit.
    """
    attempt = AbortSignal()
    ctx.signal.add_callback(attempt.abort)  # a cancel of the run reaches the attempt
    task = asyncio.ensure_future(call(dataclasses.replace(ctx, signal=attempt)))
    try:
        done, _ = await asyncio.wait({task}, timeout=limit)
        if done or ctx.signal.aborted:
            return await task
        why = f"timed out: the call took longer than its limit of {limit:g}s"
        attempt.abort(why)
        # The grace a cancel gives, twice (SIGTERM's wait, then the reap after SIGKILL).
        done, _ = await asyncio.wait({task}, timeout=2 * ctx.cancel_grace + 1.0)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
        if task.done() and not task.cancelled():
            task.exception()  # read: what it raised once aborted is not the news
        if ctx.signal.aborted:
            await task  # the run was cancelled meanwhile: that wins
        raise ToolTimedOut(why)
    finally:
        ctx.signal.remove_callback(attempt.abort)
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
        if task.done() and not task.cancelled():
            task.exception()  # read, so no "exception was never retrieved" is logged
