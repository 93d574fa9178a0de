"""A hook at the moment an awaited call is under way, without a callback on the event loop.

The run loop's crash point ``mid_model_call`` fires once the model call has started: at its
first wait (the request sent), or when it returns if it never waits (a scripted model). A
``call_soon`` callback did that at the price of a handle, its cancel and a turn of the loop on
every model turn; this wrapper runs the hook in the awaiting task itself.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


@types.coroutine
def at_first_wait(call: Awaitable[T], hook: Callable[[], None]) -> Generator[Any, Any, T]:
    """Await ``call``, calling ``hook`` once it is under way: at its first wait (the request
    sent), or as soon as it returns if it never waits. What the task sends or throws in goes
    on to ``call``: it is ``await call`` with a hook, and no callback on the event loop."""
    # A coroutine is driven as it is: its ``__await__`` is a wrapper object per call.
    it = call if isinstance(call, types.CoroutineType) else call.__await__()
    try:
        value = it.send(None)
    except StopIteration as done:
        hook()
        return done.value  # type: ignore[no-any-return]
    hook()
    while True:
        try:
            sent = yield value
        except GeneratorExit:
            it.close()
            raise
        except BaseException as exc:
            try:
                value = it.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                value = it.send(sent)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
