"""The keyword options of the ``Store`` contract are defined once (``Appending``,
``Claiming``, ``Recording``); ``SQLStore.append`` spells its own out for speed, and this
holds it to the definition where mypy cannot: which options may be left out."""

from __future__ import annotations

import inspect
from typing import Any, Required, get_origin, get_type_hints

from stead.store.sql._base import Appending, Claiming
from stead.store.sql._chat import Recording
from stead.store.sql._store import SQLStore


def _keywords(fn: Any) -> tuple[set[str], set[str]]:
    params = inspect.signature(fn).parameters.values()
    named = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return {p.name for p in named}, {p.name for p in named if p.default is p.empty}


def test_sqlstore_append_takes_exactly_the_options_of_appending() -> None:
    names, required = _keywords(SQLStore.append)
    assert names == set(Appending.__annotations__)
    # Read from the evaluated hints: under postponed annotations Python 3.11 cannot see
    # ``Required[...]`` when it makes the class (``__required_keys__`` is empty there).
    hints = get_type_hints(Appending, include_extras=True)
    marked = {k for k, v in hints.items() if get_origin(v) is Required}
    assert required == marked == {"expected_seq", "epoch", "status", "now"}


def test_the_other_options_are_read_from_their_definition() -> None:
    for fn, options in ((SQLStore.claim_next, Claiming), (SQLStore.record_message, Recording)):
        (kwargs,) = [
            p for p in inspect.signature(fn).parameters.values() if p.kind is p.VAR_KEYWORD
        ]
        assert options.__name__ in str(kwargs.annotation)
