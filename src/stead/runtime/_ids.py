"""A run named by the start of its id, in a store: ``stead.core.id_prefix``'s rule, applied
to the runs the store holds. Every face that takes a run id a person typed resolves it here."""

from __future__ import annotations

from stead.core.id_prefix import choose
from stead.errors import RunNotFound
from stead.store import Store

SCAN = 1_000_000
"""At most this many runs are looked through for a start (the store has no prefix query)."""


async def resolve_run_id(store: Store, text: str) -> str:
    """The run id ``text`` names: the id itself, or the one run whose id it starts (with or
    without ``run_``). ``RunNotFound`` when it names none; ``AmbiguousId`` (with the
    candidates) when it is too short or the start of several.

    An exact id costs one primary-key read; only a miss looks through the runs.
    """
    try:
        await store.get_run(text)
        return text
    except RunNotFound as missing:
        not_found = missing
    ids = [r.run_id for r in await store.list_runs(limit=SCAN)]
    found = choose(text, ids, noun="run", strip="run_")
    if found is None:
        raise not_found
    return found
