"""Which id a person meant by the start of one: the one rule every face resolves ids by.

A person types the start of an id (``stead cancel 3f9a2c``, as ``runs list`` shows it).
The start names an id only when it is long enough to mean something and is the start of
exactly one id; otherwise the caller is refused with the candidates, so nobody acts on the
wrong run. An empty text (an unset ``$RUN``) would otherwise be the start of every id.

* An exact id always names itself, however short a chosen id is.
* Otherwise the text, less a leading ``strip`` (``run_`` for run ids: the list shows ids
  without it), must be at least ``MIN_PREFIX`` characters, and the start of one id alone
  (with or without ``strip``).

Pure: the caller hands in the ids to choose from.
"""

from __future__ import annotations

from collections.abc import Iterable

from stead.errors import AmbiguousId

MIN_PREFIX = 4
"""Characters a start must have, ``run_`` aside (16 bits of a generated id's hex)."""

SHOWN = 10
"""Candidates named in a refusal."""


def matches(text: str, ids: Iterable[str], *, strip: str = "") -> list[str]:
    """The ids ``text`` is the start of (with or without ``strip`` before it), sorted."""
    longer = f"{strip}{text}" if strip else None
    return sorted(i for i in ids if i.startswith(text) or (longer and i.startswith(longer)))


def choose(
    text: str, ids: Iterable[str], *, noun: str = "run", strip: str = "", cut: bool = False
) -> str | None:
    """The one id ``text`` names among ``ids``; None when it is the start of none (the
    caller's "not found").

    ``AmbiguousId`` (a ``UserError`` holding the candidates) when the text starts ids but is
    too short to mean something, or starts more than one. ``noun`` names the ids in messages;
    ``cut`` says ``ids`` are the first of more (a store asked for a bounded number), so a
    refusal counts "or more".
    """
    pool = list(ids)
    if text in pool:
        return text
    found = matches(text, pool, strip=strip)
    if not found:
        return None
    if len(text.removeprefix(strip) if strip else text) < MIN_PREFIX or not text.strip():
        raise AmbiguousId(
            f"{noun} id {text!r} is too short to name a {noun}: type the whole id or at "
            f"least {MIN_PREFIX} characters of it{_starting(found, noun, cut)}",
            found,
        )
    if len(found) > 1:
        raise AmbiguousId(
            f"{noun} id {text!r} is the start of {_count(found, cut)} {noun}s: "
            f"{_names(found, cut)}; type more of it",
            found,
        )
    return found[0]


def _count(found: list[str], cut: bool) -> str:
    return f"{len(found)} or more" if cut else str(len(found))


def _names(found: list[str], cut: bool) -> str:
    more = len(found) - SHOWN
    if more <= 0 and not cut:
        return ", ".join(found)
    return ", ".join(found[:SHOWN]) + f" and {'at least ' if cut else ''}{max(more, 0)} more"


def _starting(found: list[str], noun: str, cut: bool) -> str:
    many = len(found) > 1
    return (
        f" ({_count(found, cut)} {noun}{'s start' if many else ' starts'} with it: "
        f"{_names(found, cut)})"
    )
