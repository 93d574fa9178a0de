"""A run's own deadline (``Limits.max_duration``), as the process driving it keeps it.

The deadline is data in the log (``run_deadline_set``, written with ``run_started``), so it
survives the process that set it: any claimant folds it back and checks it before every step,
and ``Runtime.expire_approvals`` (a worker's sweep) times out a run that waits on a person past
it. While a step runs, a timer aborts the run's signal at the deadline, the way a cancel does:
the model stream closes, tools get ``Limits.cancel_grace`` and their process groups are
stopped; the drive then records ``run_timed_out``. Open calls stay open: a resume recovers
them as after a crash (a ``non_idempotent`` call in flight is reconciled or asked about).
The clock is read here, in the runtime, never in ``stead.core``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from stead._signal import AbortSignal
from stead.core.builders import deadline_events, deadline_passed, run_timeout_events
from stead.core.events import Event
from stead.core.limits import Limits
from stead.core.states import RunStatus
from stead.runtime.loop._owned import OwnedRun, Rewound

REASON = "the run passed its deadline (Limits.max_duration)"
"""What the signal says when the deadline aborts a step."""


class DeadlineWatch:
    """Checks one drive's run against its deadline, and wakes the drive when it passes."""

    __slots__ = ("_armed", "_clock", "_fired", "_limits", "_session", "_signal", "_timer")

    def __init__(
        self,
        session: OwnedRun,
        limits: Limits,
        signal: AbortSignal,
        clock: Callable[[], float],
    ) -> None:
        self._session = session
        self._limits = limits
        self._signal = signal
        self._clock = clock
        self._timer: asyncio.TimerHandle | None = None
        self._armed: float | None = None
        self._fired = False

    def start_events(self) -> list[Event]:
        """What ``run_started`` carries: the deadline of a run starting now, if any."""
        return deadline_events(
            self._limits.max_duration, self._limits.duration_counts_waiting, self._clock()
        )

    async def expired(self) -> RunStatus | None:
        """Before a step: record ``run_timed_out`` and return the status to rest in when the
        deadline has passed (or when it aborted a step and the run now rests where its wait
        does not count); else arm the timer for the step and return None."""
        state = self._session.state
        if state.deadline is None:
            return None
        ended = run_timeout_events(state, self._clock())
        if ended:
            try:
                await self._session.append(ended, automatic=False)
            except Rewound:
                return None  # held steps dropped for another writer's event: look again
            return RunStatus.TIMED_OUT
        if self._fired:
            # The timer stopped a step, and the run moved (a wait that does not count) before
            # the deadline could end it: rest; the next drive starts a fresh signal.
            assert state.status is not None
            return state.status
        self._arm(state.deadline)
        return None

    def stop(self) -> None:
        """The drive is over: no timer outlives it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, deadline: float) -> None:
        if self._armed == deadline:
            return
        self.stop()
        self._armed = deadline
        delay = max(0.0, deadline - self._clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        state = self._session.state
        if state.deadline is None:
            return
        now = self._clock()
        if deadline_passed(state, now):
            self._fired = True
            self._signal.abort(REASON)
        elif now <= state.deadline:  # early (a clock that moved): look again then
            self._armed = None
            self._arm(state.deadline)
