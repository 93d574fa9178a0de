"""Virtual time: one clock that is both a Runtime's ``clock=`` and the time of the event loop
the Runtime runs on, so leases, keeper beats, store polls, backoffs, tool timeouts and run
deadlines pass in virtual seconds, in no time at all.

The runtime's waits are all the event loop's timers (``asyncio.sleep``, ``call_later``,
``asyncio.wait(timeout=)``, ``loop.time()``): the loop's clock is asyncio's seam for time,
as ``trio.run(clock=...)`` is trio's. ``VirtualClock`` installs itself there, and the same
object is the wall clock the runtime stamps leases and deadlines with, so the two never
disagree. Production code pays nothing for it: a Runtime on an ordinary loop uses
``time.time`` and the loop's monotonic clock as it always did.

As trio's ``MockClock(autojump_threshold=0)`` does, time jumps to the next timer as soon as
every task waits on one: nothing is ready, no thread of the loop's executor is working, and
no socket or pipe the loop watches has answered within ``io_grace`` real seconds. A test can
also move time itself (``advance``).

    clock = VirtualClock()
    clock.run(main(clock))      # main: Runtime(store, clock=clock, lease_ttl=30, ...)

Work the loop cannot see (a thread of one's own that calls back with
``call_soon_threadsafe``) may find time moved on while it ran, as on a slow machine.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

PAST = 1e-6
"""How far past a timer a jump lands: a real clock read after a sleep is always a little
later, and code that waits for a time to have passed (``now > deadline``) relies on that;
a jump landing on the timer exactly left such code re-arming a zero delay forever."""

START = 1_767_225_600.0
"""2026-01-01 00:00:00 UTC: where a clock's wall time starts unless told otherwise."""


class VirtualClock:
    """Virtual seconds for a Runtime and the event loop it runs on (see the module's text).

    Calling it gives the wall time (``clock=``); ``monotonic()`` is the loop's time."""

    def __init__(self, start: float = START, *, io_grace: float = 0.05) -> None:
        self._start = start
        self._elapsed = 0.0
        self.io_grace = io_grace
        """Real seconds a loop that watches sockets or pipes waits for them before it lets
        time jump (a database's answer or a child's output on the way)."""

    def __call__(self) -> float:
        return self._start + self._elapsed

    def monotonic(self) -> float:
        """Virtual seconds since the clock was made: the event loop's ``time()``."""
        return self._elapsed

    def advance(self, seconds: float) -> None:
        """Move time on by ``seconds``; the timers due by then fire at the loop's next turn."""
        if not seconds >= 0:
            raise ValueError(f"time only moves forward, not by {seconds!r}")
        self._elapsed += seconds

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        """An event loop whose time is this clock's."""
        return _VirtualLoop(self)

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run ``main`` to its end on a fresh loop of this clock (``asyncio.run``'s rules)."""
        with asyncio.Runner(loop_factory=self.new_event_loop) as runner:
            return runner.run(main)


class _Selector(selectors.DefaultSelector):
    """The loop's selector: where the loop would sleep until its next timer, time jumps."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock
        self.working: Callable[[], bool] = lambda: False
        """Whether the loop's executor still runs a job (its result will come back)."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout <= 0:
            return super().select(timeout)
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            return super().select(None)  # no timer at all: only I/O or a thread can wake us
        grace = self._clock.io_grace
        if self.working():
            return super().select(grace)  # a thread's answer is coming: never jump past it
        # One registration is the loop's own wake-up pipe; any other is I/O that may answer.
        if len(self.get_map()) > 1:
            ready = super().select(grace)
            if ready:
                return ready
        self._clock.advance(timeout + PAST)
        return []


class _VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock) -> None:
        selector = _Selector(clock)
        super().__init__(selector)
        self._virtual = clock
        self._jobs = 0
        selector.working = lambda: self._jobs > 0

    def time(self) -> float:
        return self._virtual.monotonic()

    def run_in_executor(
        self, executor: Executor | None, func: Callable[[*Ts], T], *args: *Ts
    ) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self._jobs += 1
        future.add_done_callback(self._job_done)
        return future

    def _job_done(self, _: asyncio.Future[Any]) -> None:
        self._jobs -= 1
