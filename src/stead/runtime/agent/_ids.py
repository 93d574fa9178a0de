"""A run named by the start of its id, in a store: ``stead.core.id_prefix``'s rule, applied
to the runs the store holds. Every face that takes a run id a person typed resolves it here:
the CLI and the HTTP routes before they call the runtime, and every ``Runtime`` method that
takes a run id (``takes_id_prefix``), so ``rt.get("3f9a2c01")`` works as ``stead runs show
3f9a2c01`` does."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar, cast

from stead.core.id_prefix import choose
from stead.errors import RunNotFound
from stead.runtime.agent import _checks as checks
from stead.store import Store

CANDIDATES = 100
"""Ids asked of the store for a start: one more than the few a refusal names would tell one
from several; these many let it count them in all but a flood."""


async def resolve_run_id(store: Store, text: str) -> str:
    """The run id ``text`` names: the id itself, or the one run whose id it starts (with or
    without ``run_``). ``RunNotFound`` when it names none; ``AmbiguousId`` (with the
    candidates) when it is too short or the start of several.

    An exact id costs one primary-key read; a miss one read of the ids index's ranges
    (``Store.run_ids_starting``), however many runs there are.
    """
    try:
        await store.get_run(text)
        return text
    except RunNotFound as missing:
        not_found = missing
    ids = await store.run_ids_starting([text, f"run_{text}"], limit=CANDIDATES)
    found = choose(text, ids, noun="run", strip="run_", cut=len(ids) >= CANDIDATES)
    if found is None:
        raise not_found
    return found


class _Stored(Protocol):
    @property
    def store(self) -> Store: ...


M = TypeVar("M", bound=Callable[..., Coroutine[Any, Any, Any]])


def takes_id_prefix(method: M) -> M:
    """A ``Runtime`` method whose first argument (``run_id``) is a run id, made to take the
    start of one.

    The id is tried as given first, so a whole id (what every program passes) costs nothing
    more; only when the method finds no run by that text is it resolved (``resolve_run_id``)
    and the method called again with the id it names. Nothing was written on the first try:
    a method finds its run before it writes to it. A run missing for another id (a child, a
    parent) is that method's own error, passed on as it is. An empty or non-text id is a
    ``UserError`` before anything is read.
    """

    @functools.wraps(method)
    async def named(self: _Stored, *args: Any, **kwargs: Any) -> Any:
        if args:
            run_id, rest = args[0], args[1:]
        elif "run_id" in kwargs:
            run_id, rest = kwargs.pop("run_id"), ()
        else:
            return await method(self, **kwargs)  # Python's own TypeError: no run id given
        checks.identifier("run_id", run_id)
        try:
            return await method(self, run_id, *rest, **kwargs)
        except RunNotFound as missing:
            if missing.run_id != run_id:
                raise
            whole = await resolve_run_id(self.store, run_id)
        return await method(self, whole, *rest, **kwargs)

    return cast(M, named)
