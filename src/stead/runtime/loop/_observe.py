"""The observer seam: what a drive tells a tracer, and what it records of its tool sources.

A drive calls ``observing`` once when it starts and gets ``DriveHooks``: a wrapper for its
executor (every model and tool call passes through it), a callback for every commit, and an
end. With no observer and no tool source (an MCP server) that is ``NO_HOOKS``, whose methods
do nothing: no per-step work is added to a run nobody watches (``bench/overhead.py``).

At a drive's start, and only when they changed since the log last said, it records each tool
source's listing (``tools_listed``), and each observer may add notes of its own (the tracer's
``trace_linked``): one commit, not fsynced on its own (losing it in a power cut loses no
effect; the next commit syncs it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stead.core.builders import listing_events
from stead.core.events import Event
from stead.core.fold import RunState
from stead.errors import UserError
from stead.runtime.agent import Agent
from stead.runtime.executors import Executor
from stead.runtime.loop._owned import OwnedRun
from stead.store import StoredEvent

log = logging.getLogger("stead.runtime")


@dataclass(frozen=True, slots=True)
class DriveStart:
    """What an observer learns when a drive starts."""

    owned: OwnedRun
    agent: Agent
    previous_owner: str | None
    """Who held the run before this drive (a crashed or released worker), if anyone."""
    log: Sequence[StoredEvent]
    """The run's whole log, read once for the observers and sources."""
    deps: Any = None
    """The Runtime's live objects for tools (``Runtime(deps=...)``), never recorded."""


class DriveWatch(Protocol):
    """One observer's view of one drive."""

    def notes(self) -> list[Event]:
        """Events to record at the drive's start (they must never move the run)."""
        ...

    def executor(self, inner: Executor) -> Executor:
        """The executor the drive uses: ``inner``, or a wrapper that watches every call."""
        ...

    def committed(self, state: RunState, events: Sequence[Event]) -> None:
        """Called after every commit of the drive with what it appended."""
        ...

    def ended(self, state: RunState, error: BaseException | None) -> None:
        """The drive returned (the run rests) or raised ``error``."""
        ...


class Observer(Protocol):
    """Given to ``Runtime(observers=[...])``; asked once per drive (``stead.otel.Tracing``)."""

    def begin(self, start: DriveStart) -> DriveWatch:
        """Start watching a drive."""
        ...


class DriveHooks:
    """The watches of one drive, called together."""

    def __init__(self, watches: Sequence[DriveWatch]) -> None:
        self._watches = tuple(watches)

    def executor(self, inner: Executor) -> Executor:
        for w in self._watches:
            inner = w.executor(inner)
        return inner

    def committed(self, state: RunState, events: Sequence[Event]) -> None:
        for w in self._watches:
            try:
                w.committed(state, events)
            except Exception as exc:  # an observer's bug must not fail the run
                log.warning("run %s: an observer failed on a commit: %r", state.run_id, exc)

    def ended(self, state: RunState, error: BaseException | None) -> None:
        for w in self._watches:
            try:
                w.ended(state, error)
            except Exception as exc:
                log.warning("run %s: an observer failed at the end: %r", state.run_id, exc)


NO_HOOKS = DriveHooks(())


def checked(observers: object) -> list[Observer]:
    """``Runtime(observers=...)`` as a list, or a ``UserError`` saying what to pass."""
    if isinstance(observers, str | bytes) or not isinstance(observers, Iterable):
        raise UserError(
            f"observers takes a list of observers (stead.otel.Tracing()...), "
            f"not {type(observers).__name__}"
        )
    found = list(observers)
    for o in found:
        if not callable(getattr(o, "begin", None)):
            raise UserError(
                f"observers: {type(o).__name__} is not an observer; it needs a "
                "begin(DriveStart) method (stead.otel.Tracing is one)"
            )
    return found


async def observing(
    observers: Sequence[Observer],
    owned: OwnedRun,
    agent: Agent,
    previous_owner: str | None,
    deps: Any = None,
) -> DriveHooks:
    """The drive's hooks, after recording its sources' listings and its observers' notes."""
    sources = agent.registry.sources()
    if not observers and not sources:
        return NO_HOOKS
    history = await owned.store.read_events(owned.state.run_id)
    start = DriveStart(owned, agent, previous_owner, history, deps)
    watches = [o.begin(start) for o in observers]
    notes: list[Event] = [*_listings(sources, history)]
    for w in watches:
        notes.extend(w.notes())
    if notes:
        await owned.append(notes, automatic=False, sync=False)
    hooks = DriveHooks(watches)
    if watches:
        owned.on_commit = hooks.committed
    return hooks


def _listings(sources: Iterable[object], history: Sequence[StoredEvent]) -> list[Event]:
    """A ``tools_listed`` for each source whose tools differ from its last one in the log."""
    listings: dict[str, dict[str, Any]] = {}
    for source in sources:
        name = str(getattr(source, "name", ""))
        definitions = getattr(source, "definitions", None)
        if name and definitions is not None:
            listings[name] = definitions()
    return listing_events((s.event for s in history), listings)
