"""Reading the fields of a reply a provider (or a proxy, or a compatible server) may get wrong.

Both wire modules read every number, text and id of a reply through these, so that whatever
a server sends becomes either a readable reply or a stable failure code, never a value the
event log would refuse later (a negative token count made every later read of the run raise
``CorruptEvent``) and never a stray ``ValueError``:

- **Token counts are clamped, not trusted.** A count is a non-negative ``int`` no larger
  than ``MAX_COUNT``: a negative number counts 0, a float is truncated (``12.0`` is 12), a
  huge one is ``MAX_COUNT`` (so a budget trips rather than a reader), a string of digits is
  its number. Anything else (``null``, ``"ten"``, a boolean, a list, NaN) is *not reported*:
  the field keeps what an earlier event said, or 0. The reply itself is still good (its text
  and tool calls are what the model produced), so a broken usage field does not fail a run
  that was billed for it; the price is that such a call counts less than it cost, which is
  what the provider said.
- **Text is a string.** ``null`` is empty; a number or an object where text belongs is its
  JSON (``5`` -> ``"5"``), which the model and a person can read.
- **A tool call always has an id.** A missing or empty one becomes ``missing_call_id`` (turn
  and position, so it is stable across a crash and a resume and says what happened); the
  core makes ids that repeat in a run unique.
"""

from __future__ import annotations

import json
import math

MAX_COUNT = 2**53 - 1
"""The largest token count recorded (the largest integer every JSON reader keeps exactly)."""


def count(value: object) -> int | None:
    """A token count from a provider's number; None when the value is not a number at all."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii() or not text.isdigit():
            return None
        value = int(text) if len(text) <= 20 else MAX_COUNT
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = MAX_COUNT if value >= MAX_COUNT else int(value)
    if not isinstance(value, int):
        return None
    return min(max(value, 0), MAX_COUNT)


def text(value: object) -> str:
    """Text from a field that should hold a string."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def missing_call_id(turn_index: int, position: int) -> str:
    """The id given to a tool call the provider sent without one."""
    return f"missing_id_{turn_index}_{position}"
