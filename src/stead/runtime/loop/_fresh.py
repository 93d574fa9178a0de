"""A run this Runtime just created, driven without reading back the event it just wrote.

``Runtime.start`` writes a run's ``run_created``; ``Runtime.run`` then read it back
(``store.load``: a query, a decode, a fold) to learn what it had in hand. ``FreshRuns``
keeps the event of each run started here, until its first drive, and gives the drive the
state folded from it instead, when the store says nothing happened to the run in between:

* the run's row (read before the claim) is still ``queued`` at sequence 1, so its log is
  that one event; and
* the claim's epoch is the row's plus one, so no other owner claimed it in between (every
  claim bumps the epoch).

An append by someone who holds no lease (a cancel request) after the row was read is what it
would be after a load: the drive's first append meets it (a ``Conflict``, its expected
sequence is 1), reads the log again and goes on from there, before any effect.

Kept only for a run without history, attachments or config (their values are the caller's
objects, and the log holds what they were at ``start``) whose input is short, and for at most
``KEEP`` runs (started here, driven elsewhere): the oldest is dropped, and its drive reads the
log.
"""

from __future__ import annotations

from typing import Final

from stead.core.events import RunCreated
from stead.core.fold import RunState, apply
from stead.store import RunRecord

KEEP: Final = 1024
"""Runs started and not driven yet whose ``run_created`` is kept, at most."""
KEEP_CHARS: Final = 8192
"""A run whose input is longer is not kept: runs started here and driven elsewhere leave
their entries until they are the oldest, and those stay small."""


class FreshRuns:
    """The ``run_created`` of runs started by this Runtime and not driven yet."""

    __slots__ = ("_created",)

    def __init__(self) -> None:
        self._created: dict[str, RunCreated] = {}

    def started(self, event: RunCreated) -> None:
        """``event`` was committed: keep it for the run's first drive, if it can be."""
        if event.history or event.history_from or event.attachments or event.config:
            return
        if len(event.input) > KEEP_CHARS:
            return
        created = self._created
        if len(created) >= KEEP:
            created.pop(next(iter(created), ""), None)
        created[event.run_id] = event

    def state(self, run_id: str, record: RunRecord, epoch: int) -> RunState | None:
        """The state of a run still as it was created (``record`` read before the claim that
        gave ``epoch``), else None: read the log. Either way the run is forgotten here."""
        event = self._created.pop(run_id, None) if self._created else None
        if event is None or record.status != "queued" or record.last_seq != 1:
            return None
        if epoch != record.epoch + 1:
            return None  # claimed by another owner since the row was read
        state = RunState()
        apply(state, event, 1)
        return state
