"""A drive's lease on its run, as the drive uses it: lost means stop, as a cancel does, and
checked right before each effect that is not read_only.

The local deadline (``stead._lease.HeldLease``) starts at the claim and moves with every
renewal the store confirms (the keeper's, or one made here). When it is lost, the run is
fenced (its handle writes nothing more) and its abort signal fires: tools see ``ctx.aborted``,
their process groups get SIGTERM then SIGKILL, the model stream is closed, and the drive
raises ``Fenced`` and gives the run up, to whoever claims it next (this process too, once the
store answers again).

Before an effect the guard asks only the clock while the lease has ``min_left`` seconds or
more (no round trip: nearly every effect); with less it renews first, bounded by what is left,
and lets the effect start only when the lease again has ``min_left``. A renewal that fails
there loses the lease: an effect started on a lease about to lapse could run beside the next
owner's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from stead._lease import TAKEN, HeldLease
from stead._signal import AbortSignal
from stead.errors import StoreError
from stead.runtime.loop._owned import OwnedRun
from stead.store import Store

log = logging.getLogger("stead.runtime")


def default_margin(ttl: float) -> float:
    """The local deadline's head start on the store's expiry: a quarter of the TTL, for the
    rates of two machines' clocks and the lease's bookkeeping being read on another one."""
    return ttl / 4


def wait_bound(margin: float) -> float:
    """The longest one blocking wait on the store may last for a holder with this margin
    (``Store.bound_waits``): half of it. A wait begun just before the local deadline then
    ends, and the deadline's abort fires, while the store still counts the lease as the
    holder's; on SQLite, whose statements run on the event loop's thread, nothing else
    would let that timer run. 0 (no margin) bounds nothing."""
    return margin / 2


def min_left_for(ttl: float, margin: float, wanted: float) -> float:
    """The lease an effect needs left: ``wanted``, but never more than half of what a fresh
    renewal gives (with a short TTL every effect would otherwise renew and still fall short)."""
    return min(wanted, (ttl - margin) / 2)


class LeaseGuard:
    """One drive's lease: its local deadline, its renewal, and the check before an effect."""

    __slots__ = ("_clock", "_owner", "_store", "_ttl", "held", "min_left", "owned")

    def __init__(
        self,
        held: HeldLease,
        owned: OwnedRun,
        signal: AbortSignal,
        *,
        store: Store,
        owner: str,
        ttl: float,
        clock: Callable[[], float],
        min_left: float,
    ) -> None:
        self.held = held
        self.owned = owned
        self.min_left = min_left
        self._store, self._owner, self._ttl, self._clock = store, owner, ttl, clock

        def lost(reason: str) -> None:  # from whichever thread read the deadline
            owned.fenced = True
            signal.abort(reason)

        held.lost.add_callback(lost)

    def fresh(self) -> bool:
        """True while the lease has ``min_left`` seconds or more: an effect may start with no
        round trip (nearly always). False says only "ask ``ready``"."""
        return self.held.holds(self.min_left)

    async def ready(self) -> bool:
        """True when an effect may start now: the lease has ``min_left`` seconds left, after
        a renewal if it had fewer. False once it is lost (the drive then stops)."""
        held = self.held
        if held.lapsed():
            return False
        if held.left() >= self.min_left:
            return True
        await self.renew()
        if not held.lapsed() and held.left() < self.min_left:
            held.lose("lease lost: it could not be renewed before an effect")
        return not held.lapsed()

    async def renew(self) -> None:
        """Renew now (one statement), waiting no longer than the lease has left."""
        held, owned = self.held, self.owned
        sent = held.now()
        lease = [(owned.state.run_id, owned.epoch)]
        try:
            async with asyncio.timeout(max(0.0, held.left())):
                lost = await self._store.renew_leases(
                    lease, owner=self._owner, now=self._clock(), ttl=self._ttl
                )
        except (StoreError, TimeoutError) as exc:
            log.warning("run %s: renewing the lease before an effect failed: %r", lease[0][0], exc)
            return
        if lost:
            held.lose(TAKEN)
        else:
            held.confirmed(sent)
