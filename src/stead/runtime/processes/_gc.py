"""``tune_gc``: Python's cyclic garbage collector set for a process with many runs in flight.

With a thousand runs in flight, about a third of a step's CPU went into the cyclic
collector (bench/in_flight.py, SQLite, 50 ms model, measured by ``gc.callbacks``). Each run
keeps a few hundred tracked objects alive for its whole drive (its folded state, the
coroutine frames of the drive, the futures of its waits), and everything a step creates lives
for at least one model call or one group commit: long enough to outlive a young-generation
collection (every 700 net allocations, some 30 steps at that load), so it is walked again by
the next older one, and the whole heap by every full collection.

``tune_gc`` changes two things, for the whole process, when asked to (stead never does it
on its own in a program that imports it; ``stead worker`` does it, as that process is
stead's): it freezes what exists now (``gc.freeze``: the modules, classes and agents a
worker loaded at start, which no full collection then walks again, and which are never
garbage), and raises the young generation's threshold (default 10,000), so that a step's
short-lived objects are mostly freed by their reference counts before any collection sees
them. Cycles are still collected, only less often: memory held by cyclic garbage grows by
at most the threshold's worth of objects between two collections.
"""

from __future__ import annotations

import gc

from stead.errors import UserError

YOUNG_THRESHOLD = 10_000
"""Allocations (net of frees) between two young collections once tuned: measured at 1,000
runs in flight on SQLite, 5,000 left about 25 % more time in the collector and 20,000 no
less CPU than this."""


def tune_gc(young: int = YOUNG_THRESHOLD) -> None:
    """Tune this process's cyclic garbage collector for many runs in flight: freeze what
    exists now, and collect the young generation every ``young`` net allocations at the
    least. Call it once the program has loaded what it needs (it affects the whole process,
    which is why stead leaves it to the program); calling it again freezes again and keeps a
    higher threshold the program set itself."""
    if isinstance(young, bool) or not isinstance(young, int) or young < 1:
        raise UserError(f"tune_gc(young=...) takes a whole number of at least 1, not {young!r}")
    gc.collect()  # what is garbage now is freed, not frozen for the life of the process
    gc.freeze()
    first, second, third = gc.get_threshold()
    gc.set_threshold(max(first, young), second, third)
