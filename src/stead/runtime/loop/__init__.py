"""Driving one run: the run loop and what a step needs (backoff, budgets, deadlines, retries),
the owner's handle on a run (``OwnedRun``), its history, the lease keeper, the observer seam,
and acting on the reconciler's decisions at a takeover.

Imports ``stead.runtime.agent`` and ``stead.runtime.executors``; the facade and the processes
import this."""

from stead.runtime.loop._backoff import Backoff
from stead.runtime.loop._children import (
    children_of,
    descendants_usage,
    settle_parent,
    settle_waits,
)
from stead.runtime.loop._drive import Driving, dead_local_owner, owner_id
from stead.runtime.loop._fresh import FreshRuns
from stead.runtime.loop._history import continued, hydrate
from stead.runtime.loop._keeper import Keeper
from stead.runtime.loop._large import LargeResults, stored_result
from stead.runtime.loop._lease_guard import LeaseGuard, default_margin, min_left_for, wait_bound
from stead.runtime.loop._loop import RunLoop
from stead.runtime.loop._observe import DriveStart, DriveWatch, Observer, checked
from stead.runtime.loop._owned import OwnedRun

__all__ = [
    "Backoff",
    "DriveStart",
    "DriveWatch",
    "Driving",
    "FreshRuns",
    "Keeper",
    "LargeResults",
    "LeaseGuard",
    "Observer",
    "OwnedRun",
    "RunLoop",
    "checked",
    "children_of",
    "continued",
    "dead_local_owner",
    "default_margin",
    "descendants_usage",
    "hydrate",
    "min_left_for",
    "owner_id",
    "settle_parent",
    "settle_waits",
    "stored_result",
    "wait_bound",
]
