"""The holder's side of a lease: until when it can still be trusted, on this process's own
monotonic clock, and the signal that fires when that moment passes.

The store decides who may write: a lease that lapsed there may be taken over, and the taker's
epoch fences the old holder out of the log. It cannot stop that old holder from *acting*: a
process paused (SIGSTOP, a stalled VM) or cut off from the database does not know that its
lease lapsed, and would perform the effect of a call the new owner is performing too. So each
holder keeps a local deadline: the moment it *sent* the last statement the store confirmed
(the claim, a renewal), plus the lease's TTL, minus a margin for the two clocks' rates and for
the store's clock being read on another machine. When that moment passes with no newer
confirmation, the lease is lost here: ``lost`` fires (and, through it, the run's abort signal,
exactly as a cancel does), and no new effect starts.

A paused process cannot run a timer, so the deadline is also read where it matters: by
``lapsed()``, which ``ToolContext.aborted`` and the check before each effect call. A tool
that looks at ``ctx.aborted`` just before its effect is thereby safe from every pause up to
that look; a pause between the look and the effect is what ``token`` (the fencing token,
handed to the receiving service) is for.

Thread-safe as ``AbortSignal`` is: a sync tool reads ``lapsed()`` from its worker thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from stead._signal import AbortSignal

LAPSED = "lease lapsed: not renewed in time (paused, or cut off from the store)"
"""The reason a lease lost to its local deadline gives its signals."""
TAKEN = "lease lost: another worker took this run over"
"""The reason when the store refused a renewal: another holder has the lease."""


class HeldLease:
    """One holder's lease (a drive's on its run, an executor's on a key), as this process
    knows it."""

    __slots__ = ("_handle", "_now", "_until", "lost", "margin", "token", "ttl")

    def __init__(
        self,
        *,
        token: int,
        ttl: float,
        margin: float,
        sent_at: float,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """``sent_at``: when (``now``'s clock) the statement that granted the lease was sent;
        the lease counts from then, never from its answer, which may have been slow."""
        self.token = token
        """The fencing token: the holder's epoch, which grows with every change of hands."""
        self.ttl = ttl
        self.margin = margin
        """Seconds the local deadline falls short of the store's expiry."""
        self.lost = AbortSignal()
        """Fires once, when the lease is lost: its deadline passed, or the store refused a
        renewal (another holder has it)."""
        self._now = now
        self._until = sent_at + ttl - margin
        self._handle: asyncio.TimerHandle | None = None

    def now(self) -> float:
        """The clock the deadline is on (a renewal reads it before it sends)."""
        return self._now()

    def confirmed(self, sent_at: float) -> None:
        """The store renewed the lease by a statement sent at ``sent_at``."""
        self.trust_until(sent_at + self.ttl - self.margin)

    def trust_until(self, until: float) -> None:
        """Move the local deadline on to ``until`` (this clock), if that is later: what a
        confirmed renewal does, and what an executor behind HTTP does with its owner's word
        (the owner's own deadline, as it reported it)."""
        if self.lost.aborted:
            return  # lost is for good: a late answer does not bring it back
        if until > self._until:
            self._until = until
            if self._handle is not None:
                self.arm()

    def holds(self, seconds: float) -> bool:
        """Whether the lease is not lost and has ``seconds`` or more left (one call: asked
        before every effect)."""
        return not self.lost.aborted and self._until - self._now() >= seconds

    def left(self) -> float:
        """Seconds until the local deadline (negative once it passed)."""
        return self._until - self._now()

    def lapsed(self) -> bool:
        """True once the lease is lost; reading it past the deadline is what loses it, so a
        process that just woke from a pause answers True before any timer of its ran."""
        if self.lost.aborted:
            return True
        if self._now() < self._until:
            return False
        self.lose(LAPSED)
        return True

    def lose(self, reason: str) -> None:
        """The lease is lost (for good)."""
        self.lost.abort(reason)
        self.close()

    def arm(self) -> None:
        """Fire ``lost`` at the deadline from the running event loop, even if nobody reads
        ``lapsed()`` then (a renewal stuck on a dead connection reads nothing)."""
        self.close()
        if not self.lost.aborted:
            loop = asyncio.get_running_loop()
            self._handle = loop.call_later(max(0.0, self.left()), self._fire)

    def close(self) -> None:
        """Stop the timer (the holding ended)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        if not self.lapsed():  # confirmed meanwhile, by a renewal that did not re-arm
            self.arm()

    async def wait_lost(self) -> str:
        """Wait until the lease is lost; the reason."""
        if self.lapsed():
            return self.lost.reason
        return await self.lost.wait()
