"""Retention: which finished runs a store may forget (pure; the store deletes, the runtime
paces it). docs/lifecycle.md says it for users.

A run goes only when all of these hold:

* it is finished (``FINISHED``: completed, failed, cancelled, timed out). A run queued,
  running, waiting on a tool or waiting on a person is never a candidate, however old;
* nobody holds its lease (a worker resuming it has it in hand);
* its policy lets it go: it finished longer ago than its status is kept for, or it is past
  the newest ``max_runs`` finished runs of its agent;
* no run that stays was made from it: a fork names its source, and a conversation's run
  reads its history from the run before it. A source of a kept run is kept, and so are its
  own sources, to the start of the chain.

Times are the caller's (the runtime's clock): nothing here reads one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from stead.core.states import FINISHED
from stead.errors import UserError

DAY: Final = 86_400.0
"""Seconds in a day, for policies written in days."""

_FINISHED_NAMES: Final = frozenset(s.value for s in FINISHED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """How long finished runs are kept.

    ``keep``: seconds a run is kept after it finished, by its final status
    (``{"completed": 30 * DAY, "failed": 90 * DAY}``); a status not named is kept for ever.
    ``max_runs``: at most this many finished runs of each agent, the newest (None: no cap).
    ``agents``: a policy of its own for the runs of an agent, by its name (it replaces this
    one for them). ``batch``: runs deleted per transaction. A worker's background pruning
    looks again every ``interval`` seconds when it found nothing to delete, and waits
    ``pause`` seconds between two batches while there is more (the runs in flight have the
    store to themselves in between).
    """

    keep: Mapping[str, float] = field(default_factory=dict)
    max_runs: int | None = None
    agents: Mapping[str, Retention] = field(default_factory=dict)
    batch: int = 20
    interval: float = 60.0
    pause: float = 0.1

    def __post_init__(self) -> None:
        for status, seconds in self.keep.items():
            if status not in _FINISHED_NAMES:
                raise UserError(
                    f"Retention keeps finished runs only; {status!r} is not a finished status "
                    f"(use {', '.join(sorted(_FINISHED_NAMES))})"
                )
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
                raise UserError(f"Retention keep[{status!r}] takes seconds >= 0, not {seconds!r}")
        if self.max_runs is not None and (
            isinstance(self.max_runs, bool)
            or not isinstance(self.max_runs, int)
            or self.max_runs < 0
        ):
            raise UserError(f"Retention max_runs takes a whole number >= 0, not {self.max_runs!r}")
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise UserError(f"Retention batch takes a whole number >= 1, not {self.batch!r}")
        if not isinstance(self.interval, int | float) or self.interval <= 0:
            raise UserError(f"Retention interval takes seconds > 0, not {self.interval!r}")
        if not isinstance(self.pause, int | float) or self.pause < 0:
            raise UserError(f"Retention pause takes seconds >= 0, not {self.pause!r}")
        object.__setattr__(self, "keep", MappingProxyType(dict(self.keep)))
        object.__setattr__(self, "agents", MappingProxyType(dict(self.agents)))

    def for_agent(self, agent: str) -> Retention:
        """The policy for the runs of ``agent``."""
        return self.agents.get(agent, self)

    def shortest_keep(self) -> dict[str, float]:
        """Per status, the shortest time any policy here keeps it: a store need look only
        at runs older than that (each is then judged by its own agent's policy)."""
        out = dict(self.keep)
        for p in self.agents.values():
            for status, seconds in p.keep.items():
                out[status] = min(out.get(status, seconds), seconds)
        return out

    def capped(self) -> bool:
        """Whether any policy here caps the runs of an agent (``max_runs``)."""
        return self.max_runs is not None or any(
            p.max_runs is not None for p in self.agents.values()
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """What retention needs to know of one run."""

    run_id: str
    agent: str
    status: str
    finished_at: float
    """When its last event was written (seconds since the epoch)."""
    leased: bool
    """Whether a worker holds it now."""
    newer: int
    """Finished runs of its agent that finished after it."""
    dependents: tuple[str, ...] = ()
    """Runs made from it: forks of it, and the run after it in its conversation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """A run that may go, and why."""

    run_id: str
    reason: str


def expired(c: Candidate, policy: Retention, now: float) -> str | None:
    """Why the policy lets ``c`` go, on its own account (None: it is kept)."""
    if c.leased or c.status not in _FINISHED_NAMES:
        return None
    p = policy.for_agent(c.agent)
    if c.status in p.keep and now - c.finished_at >= p.keep[c.status]:
        return f"{c.status} {now - c.finished_at:.0f} s ago, kept {p.keep[c.status]:.0f} s"
    if p.max_runs is not None and c.newer >= p.max_runs:
        return f"{c.newer} newer finished runs of {c.agent}, kept {p.max_runs}"
    return None


def plan(candidates: Iterable[Candidate], policy: Retention, now: float) -> list[Verdict]:
    """The runs among ``candidates`` that may go, in the order given.

    A run any dependent of which stays (is not among those going) stays too; that is
    repeated until nothing changes, so a chain is kept back to its start. A dependent the
    caller did not pass as a candidate stays."""
    runs = list(candidates)
    going = {c.run_id: why for c in runs if (why := expired(c, policy, now)) is not None}
    changed = True
    while changed:
        changed = False
        for c in runs:
            if c.run_id in going and any(d not in going for d in c.dependents):
                del going[c.run_id]
                changed = True
    return [Verdict(run_id=c.run_id, reason=going[c.run_id]) for c in runs if c.run_id in going]
