"""Checks of what a caller passes to the ``Runtime``, before anything is written.

A wrong argument must be the caller's ``UserError`` at the call that passed it, naming what
to pass, and must write nothing: a value the store cannot hold (a dict as the input, a lone
surrogate, a NUL in an id) would otherwise fail deep inside a write, or be written and then
be unreadable. These are cheap (a type check and one UTF-8 encode of short strings), and run
once per call from outside a run, never on a run's steps.
"""

from __future__ import annotations

import math
from typing import Any

from stead.core.canonical import canonical_json
from stead.errors import UserError


def _kind(value: object) -> str:
    return type(value).__name__


def _short(value: object) -> str:
    """A short repr for a message (an int of 5000 digits has none: ``repr`` raises)."""
    try:
        shown = repr(value)
    except ValueError:
        return f"an {_kind(value)} too long to print"
    return shown if len(shown) <= 40 else shown[:37] + "..."


def text(what: str, value: object) -> str:
    """``value`` if it is a str UTF-8 can encode; a ``UserError`` naming ``what`` if not."""
    if not isinstance(value, str):
        raise UserError(f"{what} must be a str, not {_kind(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(
            f"{what} holds a lone surrogate at index {exc.start}, which UTF-8 cannot store; "
            "pass text (decode bytes with errors='replace', not 'surrogateescape')"
        ) from None
    return value


def optional_text(what: str, value: object) -> str | None:
    """``text``, or None."""
    return None if value is None else text(what, value)


def identifier(what: str, value: object) -> str:
    """A non-empty id without control characters: ids are printed, listed and used as keys
    (PostgreSQL refuses a NUL in text), so they must be plain text."""
    text(what, value)
    assert isinstance(value, str)
    if not value:
        raise UserError(f"{what} must not be empty")
    bad = next((c for c in value if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise UserError(f"{what} must not hold control characters (found {bad!r}); {value!r}")
    return value


def label(what: str, value: object) -> str:
    """An optional id: the empty string, or an ``identifier``."""
    if value == "":
        return ""
    return identifier(what, value)


def json_object(what: str, value: object) -> dict[str, Any] | None:
    """None, or a dict JSON can carry exactly (str keys; no NaN, sets, objects or cycles)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UserError(f"{what} must be a dict of JSON values (or None), not {_kind(value)}")
    try:
        canonical_json(value)
    except ValueError as exc:
        raise UserError(
            f"{what} must hold only JSON (str keys; str, int, finite float, bool, None, "
            f"list, dict values): {exc}"
        ) from None
    return value


def seconds(what: str, value: object, *, zero_ok: bool = False) -> float:
    """A finite number of seconds above zero (or zero too); an int will do, a bool will not."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise UserError(f"{what} takes a number of seconds, not {_kind(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int no float holds
        finite = False
    if not finite or value < 0 or (value == 0 and not zero_ok):
        least = "zero or more" if zero_ok else "above zero"
        raise UserError(f"{what} must be a finite number of seconds {least}, not {_short(value)}")
    return float(value)


def count(what: str, value: object, least: int) -> int:
    """An ``int`` (not a bool) of at least ``least``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"{what} takes an int of at least {least}, not {_kind(value)}")
    if value < least:
        raise UserError(f"{what} must be at least {least}, not {_short(value)}")
    return value
