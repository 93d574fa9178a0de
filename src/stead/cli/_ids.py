"""Run ids a person can type: short forms in lists, unique prefixes wherever an id is taken.

A run id is ``run_`` and 32 hex digits; the list shows the first 12 of them, which is enough
to tell runs apart in any store a person reads (48 bits) and short enough to copy. Any
unique prefix of the id, with or without ``run_``, names the run; an ambiguous one is an
error that lists the candidates, so a person never acts on the wrong run.
"""

from __future__ import annotations

import re

from stead.errors import RunNotFound, UserError
from stead.store import Store

SHORT = 12
"""Hex digits of a generated id shown in lists."""

_GENERATED = re.compile(r"run_[0-9a-f]{32}")

SCAN = 1_000_000
"""At most this many runs are looked through for a prefix (the store has no prefix query)."""


class AmbiguousRun(UserError):
    """A prefix names more than one run."""


def short_id(run_id: str) -> str:
    """What ``runs list`` shows: 12 hex digits of a generated id, a chosen id as it is."""
    if _GENERATED.fullmatch(run_id):
        return run_id[4 : 4 + SHORT]
    return run_id


async def resolve(store: Store, text: str) -> str:
    """The run id ``text`` names: the id itself, or the one run it is a prefix of.

    An exact id costs one primary-key read; only a miss looks through the runs.
    """
    try:
        await store.get_run(text)
        return text
    except RunNotFound as missing:
        not_found = missing
    matches = sorted(
        r.run_id
        for r in await store.list_runs(limit=SCAN)
        if r.run_id.startswith(text) or r.run_id.startswith(f"run_{text}")
    )
    if not matches:
        raise not_found
    if len(matches) > 1:
        shown = ", ".join(matches[:10]) + (
            f" and {len(matches) - 10} more" if len(matches) > 10 else ""
        )
        raise AmbiguousRun(
            f"run id {text!r} is the start of {len(matches)} runs: {shown}; type more of it"
        )
    return matches[0]
