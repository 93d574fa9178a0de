"""A ``Node``: one type's codec rules, apart from ``codec`` so the generated code
(``stead.core.codegen``) and the codec that uses it both import it, and not each other."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stead.core.canonical import JSON

Problem = str | None
"""What is wrong with a value, or None."""


class Node:
    """One type's rules, both ways. ``enc`` is None when a value is its own JSON; ``simple``
    is the type (or types) whose ``isinstance`` is the whole check, if there is one; ``test``
    is ``ok`` as a Python expression over ``{x}`` (the values it names in ``names``, a node
    among them standing for its own test of the same ``{x}``): a record's generated check
    inlines it (``stead.core.codegen``), and calls ``ok`` for a node without one.

    ``text`` is the same for the value's compact JSON text (what ``json.dumps`` with
    ``separators=(",", ":")`` and ``ensure_ascii=False`` writes of ``enc(x)``), for a value
    ``ok`` accepted: an expression over ``{x}`` with the values in ``text_names`` (a node
    among them standing for its own text of the same ``{x}``), or None when the value's
    JSON goes through that encoder (``stead.core.codegen``, ``text_of``).

    ``checked`` is ``ok`` and the text in one call where a node has it (a record, a sequence
    or a tagged union of records): the text of an accepted value, else None."""

    __slots__ = (
        "checked",
        "dec",
        "each",
        "enc",
        "names",
        "ok",
        "simple",
        "test",
        "text",
        "text_names",
        "why",
    )

    def __init__(
        self,
        *,
        ok: Callable[[Any], bool],
        why: Callable[[Any], Problem],
        dec: Callable[[Any], Any] | None = None,
        enc: Callable[[Any], JSON] | None = None,
        simple: type[Any] | tuple[type[Any], ...] | None = None,
        test: str | None = None,
        names: Mapping[str, Any] | None = None,
        text: str | None = None,
        text_names: Mapping[str, Any] | None = None,
    ) -> None:
        self.ok, self.why, self.enc, self.simple = ok, why, enc, simple
        self.test, self.names = test, names
        self.text, self.text_names = text, text_names
        self.each: Callable[[Any], JSON] | None = None
        self.checked: Callable[[Any], str | None] | None = None
        """A sequence's item encoder: a generated encoder maps it in line (no call of enc)."""
        self.dec = dec if dec is not None else _identity_dec(ok, why)


def _identity_dec(ok: Callable[[Any], bool], why: Callable[[Any], Problem]) -> Callable[[Any], Any]:
    def dec(value: Any) -> Any:
        if ok(value):
            return value
        raise ValueError(why(value))

    return dec


class Each:
    """In a node's ``text_names``: the text of each item of a sequence by ``node``, as a
    function of one value (for ``map``), where the node's template names it."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node
