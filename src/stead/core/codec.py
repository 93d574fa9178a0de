"""One codec for core data: frozen dataclasses to plain JSON and back, by one set of rules.

Every type a field can have is a ``Node``, which holds both directions of its rules: how a
value is written (``enc``), how JSON is read back (``dec``, which refuses with ``ValueError``),
and the check the writer runs before it writes (``ok``: a fast yes/no that builds nothing;
``why``: the explanation when ``ok`` says no). Because the reader and the writer use the same
node, what the writer accepts reads back equal: the guarantee the store relies on (it refuses
before the commit whatever ``ok`` refuses). The writer is the stricter of the two: it also
refuses what a store cannot hold or would not read back equal (an integer beyond 64 bits, a
NUL in a column, NaN, a tuple where a list belongs), while the reader takes every value of
the type, so rows written before a rule existed still load.

A ``Record`` is the node of one dataclass, compiled once from its field table: its check and
its encoder, which every append runs, are generated as straight-line Python
(``stead.core.codegen``: the fields' tests inline, the fields at their default left out). A
``Tagged`` union tells records apart by a tag field (a message's ``role``, a thinking block's
``kind``). ``node_for`` turns a type hint into its node, finding registered records. A
``Versions`` is a schema's current version and the upcasters that bring an older row to it:
events (one per kind) and the run-state snapshot use the same one.
"""

from __future__ import annotations

import enum
import json
import math
import operator
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, fields
from typing import Any, Literal, get_type_hints

from stead.core._node import Each
from stead.core._node import Node as Node  # re-exported: the codec's nodes
from stead.core._node import Problem as Problem
from stead.core.canonical import JSON, json_problem
from stead.core.codegen import compile_checked_text, compile_enc, compile_ok, compile_text

MAX_INT = 2**63
"""Integers are stored in 64 bits (SQLite INTEGER, PostgreSQL BIGINT)."""
_MAX_EXACT_FLOAT = 2**53

_STRING: typing.Final = {"f": json.encoder.encode_basestring}
"""The text of a string as the C encoder writes it (quoted, escaped, UTF-8 kept)."""
_INTEGER: typing.Final = {"f": int.__repr__}
"""The text of an integer as the C encoder writes it (an ``int`` subclass as its value)."""


# -- scalars ---------------------------------------------------------------------------------


def _plain(kind: type[Any], name: str, text: str, text_names: dict[str, Any] | None) -> Node:
    """A node whose check is ``isinstance(v, kind)``."""
    check = kind.__instancecheck__
    return Node(
        ok=check,
        why=lambda v: None if check(v) else f"expected {name}, got {v!r:.80}",
        simple=kind,
        test="isinstance({x}, {kind})",
        names={"kind": kind},
        text=text,
        text_names=text_names,
    )


STR: typing.Final = _plain(str, "a string", "{f}({x})", _STRING)
BOOL: typing.Final = _plain(bool, "a boolean", "('true' if {x} else 'false')", None)
NONE: typing.Final = Node(
    ok=lambda v: v is None,
    why=lambda v: None if v is None else f"expected null, got {v!r:.80}",
    simple=type(None),
    test="{x} is None",
    text="'null'",
)
NUL_FREE_STR: typing.Final = Node(
    ok=lambda v: isinstance(v, str) and "\x00" not in v,
    dec=STR.dec,
    why=lambda v: STR.why(v) or ("a NUL character cannot be stored here" if "\x00" in v else None),
    test="(isinstance({x}, str) and '\\x00' not in {x})",
    text="{f}({x})",
    text_names=_STRING,
)
"""Text also stored in a text column of its own: PostgreSQL text cannot hold NUL."""


def integer(lo: int = -MAX_INT + 1, hi: int = MAX_INT) -> Node:
    """Integers in ``lo <= v < hi`` (by default, what 64 bits hold)."""

    def ok(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi

    def why(v: Any) -> Problem:
        if not isinstance(v, int) or isinstance(v, bool):
            return f"expected an integer, got {v!r:.80}"
        if ok(v):
            return None
        if lo == 0 and hi == MAX_INT:
            return f"must be a non-negative integer, got {v}"
        if lo == -MAX_INT + 1 and hi == MAX_INT:
            return f"integer {v} is out of range"
        return f"integer {v} is outside {lo}..{hi - 1}"

    test = "(isinstance({x}, int) and not isinstance({x}, bool) and {lo} <= {x} < {hi})"
    return Node(
        ok=ok,
        why=why,
        dec=_int_dec,
        test=test,
        names={"lo": lo, "hi": hi},
        text="{f}({x})",
        text_names=_INTEGER,
    )


def _int_dec(v: Any) -> int:
    """Reading takes any integer: a range is the writer's rule (what the stores hold)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise ValueError(f"expected an integer, got {v!r:.80}")


INT: typing.Final = integer()
COUNT: typing.Final = integer(0)


def _float_why(v: Any) -> Problem:
    if isinstance(v, float):
        return None if math.isfinite(v) else f"{v!r} is not a finite number"
    if isinstance(v, int) and not isinstance(v, bool):
        ok = -_MAX_EXACT_FLOAT <= v <= _MAX_EXACT_FLOAT
        return None if ok else f"{v} is not exactly a number (double)"
    return f"expected a number, got {v!r:.80}"


def _float_dec(v: Any) -> float:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    raise ValueError(f"expected a number, got {v!r:.80}")


FLOAT: typing.Final = Node(ok=lambda v: _float_why(v) is None, why=_float_why, dec=_float_dec)
"""A double; an integer it holds exactly is a number too (and reads back as a float)."""


JSON_OBJECT: typing.Final = Node(
    ok=lambda v: isinstance(v, dict) and json_problem(v) is None,
    why=lambda v: json_problem(v) if isinstance(v, dict) else f"expected an object, got {v!r:.80}",
    dec=lambda v: v if isinstance(v, dict) else _refuse(f"expected an object, got {v!r:.80}"),
)


def _refuse(message: str) -> Any:
    raise ValueError(message)


def literal(allowed: tuple[str, ...]) -> Node:
    """One of a fixed set of strings."""
    return Node(
        ok=lambda v: isinstance(v, str) and v in allowed,
        why=lambda v: (
            None if isinstance(v, str) and v in allowed else f"{v!r:.80} not one of {allowed}"
        ),
        test="(isinstance({x}, str) and {x} in {allowed})",
        names={"allowed": allowed},
        text="{f}({x})",
        text_names=_STRING,
    )


def enum_of(cls: type[enum.Enum]) -> Node:
    """A member of an enum, written as its value."""

    def dec(v: Any) -> Any:
        try:
            return cls(v)
        except ValueError:
            raise ValueError(f"{v!r:.80} is not a {cls.__name__}") from None

    return Node(
        ok=lambda v: type(v) is cls,
        why=lambda v: None if type(v) is cls else f"expected a {cls.__name__}, got {v!r:.80}",
        enc=operator.attrgetter("value"),
        dec=dec,
        test="type({x}) is {cls}",
        names={"cls": cls},
    )


# -- containers and unions -------------------------------------------------------------------


def union(arms: list[Node], label: str) -> Node:
    """Any of ``arms``; ``X | None`` reads, writes and explains itself as an X."""
    if all(a.simple is not None for a in arms):
        simple = tuple(t for a in arms for t in _types(a.simple))
        return Node(
            ok=lambda v: isinstance(v, simple),
            why=lambda v: None if isinstance(v, simple) else f"{v!r:.80} matches none of {label}",
            simple=simple,
            test="isinstance({x}, {simple})",
            names={"simple": simple},
        )
    rest = [a for a in arms if a is not NONE]
    if len(rest) == 1 and len(arms) == 2:
        (x,) = rest
        x_ok, x_why, x_dec, x_enc = x.ok, x.why, x.dec, x.enc
        return Node(
            ok=lambda v: v is None or x_ok(v),
            why=lambda v: None if v is None else x_why(v),
            dec=lambda v: None if v is None else x_dec(v),
            enc=None if x_enc is None else (lambda v: None if v is None else x_enc(v)),
            test="({x} is None or {arm})",
            names={"arm": x},
            text="('null' if {x} is None else {arm})",
            text_names={"arm": x},
        )
    # Two records are a Tagged union; other mixes (str | int) no core field has
    raise TypeError(f"no codec for the union {label}")  # pragma: no cover


def _types(simple: type[Any] | tuple[type[Any], ...] | None) -> tuple[type[Any], ...]:
    return simple if isinstance(simple, tuple) else (simple,) if simple is not None else ()


def sequence(item: Node, live: type[list[Any]] | type[tuple[Any, ...]]) -> Node:
    """A tuple or a list of ``item`` (a JSON list either way, so the live type is checked)."""
    item_ok, item_why, item_dec, item_enc = item.ok, item.why, item.dec, item.enc

    def why(v: Any) -> Problem:
        if type(v) is not live:
            return f"expected a {live.__name__}, got {v!r:.80}"
        for i, x in enumerate(v):
            p = item_why(x)
            if p is not None:
                return f"[{i}]: {p}"
        return None

    def dec(v: Any) -> Any:
        if not isinstance(v, list):
            raise ValueError(f"expected a list, got {v!r:.80}")
        try:
            return live(map(item_dec, v))
        except ValueError:
            for i, x in enumerate(v):
                try:
                    item_dec(x)
                except ValueError as exc:
                    raise ValueError(f"[{i}]: {exc}") from None
            raise  # pragma: no cover - the loop finds the item

    node = Node(
        ok=lambda v: type(v) is live and all(map(item_ok, v)),
        why=why,
        dec=dec,
        enc=list if item_enc is None else (lambda v: list(map(item_enc, v))),
        test="(type({x}) is {live} and (not {x} or all(map({item}, {x}))))",
        names={"live": live, "item": item_ok},
        text="('[' + ','.join(map({item}, {x})) + ']')",
        text_names={"item": Each(item)},
    )
    node.each = item_enc
    item_checked = item.checked
    if item_checked is not None:  # records: each checked and written in one call

        def checked(v: Any) -> str | None:
            if type(v) is not live:
                return None
            parts = list(map(item_checked, v))
            return None if None in parts else "[" + ",".join(parts) + "]"  # type: ignore[arg-type]

        node.checked = checked
    return node


def keyed(item: Node, key: str) -> Node:
    """A dict of ``item`` by its attribute ``key``, written as the list of its values."""
    get = operator.attrgetter(key)
    inner = sequence(item, list)

    def ok(v: Any) -> bool:
        return (
            type(v) is dict
            and inner.ok(list(v.values()))
            and all(get(x) == k for k, x in v.items())
        )

    def why(v: Any) -> Problem:
        if type(v) is not dict:
            return f"expected a dict, got {v!r:.80}"
        return inner.why(list(v.values())) or (None if ok(v) else f"a value's {key} is not its key")

    def dec(v: Any) -> dict[str, Any]:
        return {get(x): x for x in inner.dec(v)}

    enc = typing.cast(Callable[[Any], JSON], inner.enc)
    return Node(ok=ok, why=why, dec=dec, enc=lambda v: enc(list(v.values())))


# -- records ---------------------------------------------------------------------------------

_RECORDS: dict[type[Any], Record] = {}
_TAGGED: dict[frozenset[type[Any]], Tagged] = {}


def _words(name: str) -> str:
    """``AssistantMessage`` -> ``assistant message``."""
    return re.sub(r"(?<!^)(?=[A-Z])", " ", name).lower()


def _a(words: str) -> str:
    """``assistant message`` -> ``an assistant message``."""
    return f"{'an' if words[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {words}"


class Record(Node):
    """The node of one dataclass, compiled once from its field table.

    ``nodes`` overrides the node of a field (otherwise ``node_for`` of its hint); ``exclude``
    names fields that are not written (derived ones); ``omit_defaults`` leaves fields at their
    default out of the JSON (lossless: the reader restores them; without it, every field is
    written and a missing one is refused); ``always`` are written even
    at their default; ``tag`` names the field a ``Tagged`` union tells the record by (always
    written, checked first on reading); ``check`` is a rule across fields (None or what is
    wrong); ``trusted``: the class's constructor already enforces every field's rule, so an
    instance passes on its type alone.
    """

    __slots__ = ("cls", "field_problem", "label", "tag", "tag_value", "to_text")

    def __init__(
        self,
        cls: type[Any],
        *,
        nodes: Mapping[str, Node] | None = None,
        exclude: Iterable[str] = (),
        omit_defaults: bool = True,
        always: Iterable[str] = (),
        tag: str | None = None,
        label: str | None = None,
        check: Callable[[Any], Problem] | None = None,
        trusted: bool = False,
    ) -> None:
        hints = get_type_hints(cls)
        skip = set(exclude)
        table: list[tuple[str, Node, bool, Any]] = []
        for f in fields(cls):
            if not f.init or f.name in skip:
                continue
            node = (nodes or {}).get(f.name) or node_for(hints[f.name])
            default = f.default
            if default is MISSING and f.default_factory is not MISSING:
                default = f.default_factory()
            # A record that writes every field reads every field: one missing is damage
            table.append((f.name, node, default is MISSING or not omit_defaults, default))
        self.cls, self.tag = cls, tag
        defaults = {name: default for name, _, _, default in table}
        self.tag_value = defaults.get(tag, MISSING) if tag else None
        assert self.tag_value is not MISSING, f"the tag {tag!r} of {cls} needs a default"
        self.label = label or _words(cls.__name__)
        written: set[str | None] = {tag, *always} if omit_defaults else {name for name, *_ in table}
        self.field_problem = _compile_explain(table, check)
        self.to_text: Callable[[Any], str] = compile_text(table, written)
        """The JSON text of a value ``ok`` accepted: ``enc``'s dict as the row's compact
        encoder writes it, without the dict (``stead.core.codegen``)."""
        super().__init__(
            ok=compile_ok(cls, table, check, trusted),
            why=self._why,
            dec=_compile_dec(cls, table, self.label, (tag, self.tag_value), check),
            enc=compile_enc(table, written),
            # Nested in another record: a trusted one is its type, any other its own check
            test="type({x}) is {cls}" if trusted else None,
            names={"cls": cls},
            text="{f}({x})",
            text_names={"f": self.to_text},
        )
        self.checked = compile_checked_text(cls, table, written, check, trusted)
        """``ok`` and ``to_text`` in one pass: the text of a value ``ok`` accepts, else None
        (a store's append checks and writes each event with it)."""
        _RECORDS[cls] = self

    def _why(self, value: Any) -> Problem:
        if type(value) is not self.cls:
            return f"expected {_a(_words(self.cls.__name__))}, got {value!r:.80}"
        p = self.field_problem(value)
        return None if p is None else f"{p[0]}: {p[1]}"


def _compile_dec(
    cls: type[Any],
    table: list[tuple[str, Node, bool, Any]],
    label: str,
    tagged: tuple[str | None, Any],
    rule: Callable[[Any], Problem] | None,
) -> Callable[[Any], Any]:
    """The reader: every field by its node, missing required and unknown fields refused,
    then the rule across fields."""
    tag, tag_value = tagged
    decs = [(name, node.dec, required) for name, node, required, _ in table]
    names = {name for name, *_ in table}
    expected = f"expected {_a(_words(cls.__name__))}"

    def decode(data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"expected an object, got {data!r:.80}")
        if tag is not None and data.get(tag) != tag_value:
            raise ValueError(f"{expected} ({tag} {tag_value!r}), got {tag} {data.get(tag)!r:.80}")
        kwargs = {}
        for name, dec, required in decs:
            if name in data:
                try:
                    kwargs[name] = dec(data[name])
                except ValueError as exc:
                    raise ValueError(f"field {name!r}: {exc}") from None
            elif required:
                raise ValueError(f"{label}: missing field {name!r}")
        if len(kwargs) != len(data):
            raise ValueError(f"{label}: unknown fields {sorted(map(str, set(data) - names))}")
        try:
            value = cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{label}: {exc}") from None
        problem = None if rule is None else rule(value)
        if problem is not None:
            raise ValueError(f"{label}: {problem}")
        return value

    return decode


def _compile_explain(
    table: list[tuple[str, Node, bool, Any]], rule: Callable[[Any], Problem] | None
) -> Callable[[Any], tuple[str, str] | None]:
    """``(field, what is wrong)`` for a refused value: the slow path, field by field."""
    whys = [(name, node.why) for name, node, _, _ in table]

    def explain(v: Any) -> tuple[str, str] | None:
        for name, why in whys:
            p = why(getattr(v, name))
            if p is not None:
                return name, p
        p = rule(v) if rule is not None else None
        return None if p is None else ("?", p)

    return explain


class Tagged(Node):
    """A union of records told apart by their ``tag`` field (its value is the record's)."""

    __slots__ = ("encoders",)

    def __init__(self, name: str, tag: str, *records: Record) -> None:
        by_type = {r.cls: r for r in records}
        self.encoders: dict[type[Any], Callable[[Any], JSON]] = {
            r.cls: typing.cast(Callable[[Any], JSON], r.enc) for r in records
        }
        """Each record's encoder by its class (``enc`` with one call less)."""
        by_value = {r.tag_value: r for r in records}
        assert all(r.tag == tag for r in records), "every record of a tagged union has its tag"

        def enc(v: Any) -> JSON:
            return by_type[type(v)].enc(v)  # type: ignore[misc]

        def dec(v: Any) -> Any:
            if not isinstance(v, dict):
                raise ValueError(f"expected an object, got {v!r:.80}")
            r = by_value.get(v.get(tag))
            if r is None:
                raise ValueError(f"unknown {name} {tag} {v.get(tag)!r:.80}")
            return r.dec(v)

        def ok(v: Any) -> bool:
            r = by_type.get(type(v))
            return r is not None and r.ok(v)

        def why(v: Any) -> Problem:
            r = by_type.get(type(v))
            if r is None:
                return f"expected {_a(name)}, got {v!r:.80}"
            return r.why(v)

        texts = {r.cls: r.to_text for r in records}
        text = "{texts}[type({x})]({x})"
        super().__init__(ok=ok, why=why, dec=dec, enc=enc, text=text, text_names={"texts": texts})
        by_checked = {r.cls: r.checked for r in records}

        def checked(v: Any) -> str | None:
            f = by_checked.get(type(v))
            return None if f is None else f(v)

        self.checked = checked
        _TAGGED[frozenset(by_type)] = self


def node_for(hint: Any) -> Node:
    """The node of a type hint: scalars, ``Literal`` of strings, unions, ``dict[str, Any]``
    (a JSON object), ``tuple[X, ...]``, ``list[X]``, enums, registered records and tagged
    unions of them."""
    simple = {str: STR, bool: BOOL, int: INT, float: FLOAT, type(None): NONE}
    if hint in simple:
        return simple[hint]
    if hint in _RECORDS:
        return _RECORDS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal and all(isinstance(a, str) for a in args):
        return literal(args)
    if origin in (types.UnionType, typing.Union):
        records = frozenset(a for a in args if a is not type(None))
        if len(records) > 1 and records in _TAGGED:
            tagged = _TAGGED[records]
            return tagged if len(records) == len(args) else union([tagged, NONE], str(hint))
        return union([node_for(a) for a in args], str(hint))
    if (origin is dict or hint is dict) and args in ((), (str, Any)):
        return JSON_OBJECT
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return sequence(node_for(args[0]), tuple)
    if origin is list and len(args) == 1:
        return sequence(node_for(args[0]), list)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return enum_of(hint)
    raise TypeError(f"no codec for {hint!r}")


# -- versions --------------------------------------------------------------------------------

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns a row of one version into a row of the next."""


class Versions:
    """A schema's current version and the upcasters from each older one: an old row is
    upgraded step by step before it is read; a newer one is refused rather than guessed at."""

    __slots__ = ("current", "name", "upgrades")

    def __init__(self, name: str, current: int, upgrades: Mapping[int, Upcaster]) -> None:
        self.name, self.current, self.upgrades = name, current, dict(upgrades)

    def upcast(self, version: Any, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` of ``version`` as the current version; ``ValueError`` if that cannot be."""
        if version == self.current and type(version) is int:
            return data
        if type(version) is not int:
            raise ValueError(f"{self.name} version {version!r:.40} is not a version number")
        if version > self.current:
            raise ValueError(
                f"{self.name} v{version} is newer than this stead understands (v{self.current})"
            )
        while version < self.current:
            upgrade = self.upgrades.get(version)
            if upgrade is None:
                raise ValueError(f"no upgrade from {self.name} v{version}")
            data, version = upgrade(data), version + 1
        return data
