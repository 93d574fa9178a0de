"""Run ids a person can type: short forms in lists, unique prefixes wherever an id is taken.

A run id is ``run_`` and 32 hex digits; the list shows the first 12 of them, which is enough
to tell runs apart in any store a person reads (48 bits) and short enough to copy. Any
start of the id of at least four characters, with or without ``run_``, names the run when it
starts no other (``stead.runtime.resolve_run_id``; the rule is ``stead.core.id_prefix``).
"""

from __future__ import annotations

import re

SHORT = 12
"""Hex digits of a generated id shown in lists."""

_GENERATED = re.compile(r"run_[0-9a-f]{32}")


def short_id(run_id: str) -> str:
    """What ``runs list`` shows: 12 hex digits of a generated id, a chosen id as it is."""
    if _GENERATED.fullmatch(run_id):
        return run_id[4 : 4 + SHORT]
    return run_id
