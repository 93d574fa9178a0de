"""A conversation's history, stored once: each run records only what the run before it added.

The run answering message ``k`` of a conversation starts from everything before it. Copied
whole into each ``run_created``, a conversation of ``n`` messages would store ``O(n^2)``
messages. Instead the run names the run before it (``RunCreated.history_from``) and records
only the messages that run added (its user message and its answer); the whole history is
that run's whole history, then those. A ``run_created`` is never changed, so the chain is
fixed the moment the run is created: a run resumed anywhere, after a requeue of the run
before it, or read by an older log reader through ``Runtime.events``, sees exactly the
history it started with. Logs written before (the whole history inline, no ``history_from``)
load as they are.

The pure core folds a ``run_created`` with its history in full: the stores' readers here
resolve the chain (``hydrate``) before a fold, and keep each run's resolved history per
store (a conversation answered in one process reads the run before each message once).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from stead.core.events import RunCreated
from stead.core.messages import Message
from stead.errors import RunNotFound, StoreError
from stead.store import Store, StoredEvent

_KEPT: Final = 256
"""Resolved histories kept per store (the runs most recently read)."""

_cache: weakref.WeakKeyDictionary[Store, OrderedDict[str, tuple[Message, ...]]] = (
    weakref.WeakKeyDictionary()
)


def _kept(store: Store) -> OrderedDict[str, tuple[Message, ...]]:
    try:
        return _cache.setdefault(store, OrderedDict())
    except TypeError:  # a store that cannot be weakly referenced keeps nothing
        return OrderedDict()


def _keep(kept: OrderedDict[str, tuple[Message, ...]], run_id: str, h: tuple[Message, ...]) -> None:
    kept[run_id] = h
    kept.move_to_end(run_id)
    while len(kept) > _KEPT:
        kept.popitem(last=False)


async def _created(store: Store, run_id: str, by: str) -> RunCreated:
    try:
        events = await store.read_events(run_id, limit=1)
    except RunNotFound:
        events = []
    first = events[0].event if events else None
    if not isinstance(first, RunCreated):
        raise StoreError(
            f"run {by}'s history continues run {run_id}, whose run_created is not in this "
            "store; restore that run (a conversation's runs are kept together)"
        )
    return first


async def full_history(store: Store, created: RunCreated) -> tuple[Message, ...]:
    """Every message before ``created.input``: the chain of ``history_from`` read back to a
    run that records its history whole, each run's own part after the one before."""
    if not created.history_from:
        return created.history
    kept = _kept(store)
    parts: list[tuple[str, tuple[Message, ...]]] = []  # newest first
    run_id, seen = created.history_from, {created.run_id}
    prefix: tuple[Message, ...] = ()
    while True:
        if run_id in kept:
            prefix = kept[run_id]
            kept.move_to_end(run_id)
            break
        if run_id in seen:
            raise StoreError(f"run {created.run_id}'s history refers back to itself (at {run_id})")
        seen.add(run_id)
        before = await _created(store, run_id, created.run_id)
        parts.append((run_id, before.history))
        if not before.history_from:
            break
        run_id = before.history_from
    for rid, own in reversed(parts):
        prefix = prefix + own
        _keep(kept, rid, prefix)
    return prefix + created.history


async def hydrate(store: Store, events: Sequence[StoredEvent]) -> list[StoredEvent]:
    """``events`` with a ``run_created`` that continues another run's history resolved to the
    whole history (as a log written before ``history_from`` holds it)."""
    out = list(events)
    first = out[0].event if out else None
    if isinstance(first, RunCreated) and first.history_from:
        whole = await full_history(store, first)
        _keep(_kept(store), first.run_id, whole)
        event = dataclasses.replace(first, history=whole, history_from="")
        out[0] = dataclasses.replace(out[0], event=event)
    return out


async def continued(
    store: Store, before: str, history: tuple[Message, ...]
) -> tuple[tuple[Message, ...], str]:
    """``(history, history_from)`` for a run after run ``before`` whose whole history is
    ``history``: only what ``before`` added, and its id, when ``history`` continues
    ``before``'s own history (it does for a conversation); else the whole of it."""
    if not before:
        return history, ""
    kept = _kept(store)
    if before in kept:
        own = kept[before]
    else:
        own = await full_history(store, await _created(store, before, "(new)"))
    if own and len(own) <= len(history) and history[: len(own)] == own:
        return history[len(own) :], before
    return history, ""
