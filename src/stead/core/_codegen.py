"""The codec's two hot functions of a record, generated once as Python source and compiled
(and ``compile_copy``, one record built from another's same-named fields, the same way).

Every append checks each event with its record's ``ok`` and writes it with its ``enc``. Built
from closures (one small function per field, chained by ``all(map(...))``) the check and the
encoder cost a Python call per field on every event; generated as straight-line code they are
one call each: the type tests and ranges inline, one local per field. The rules themselves are
still the nodes' (``stead.core.codec``): a node gives ``test``, the source of its ``ok`` as an
expression over ``{x}`` with the values it needs in ``names``, and a node without one is
called through its ``ok``. What is generated is built only from those templates and field
names (identifiers), never from data: this is the one ``exec`` of the core, and it is pure
(no I/O, no clock; ``tests/core/test_purity.py`` allows it here alone).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from stead.core.canonical import JSON
    from stead.core.codec import Node, Problem

    Table = list[tuple[str, Node, bool, Any]]

T = TypeVar("T")


class _Source:
    """A namespace of values the generated code refers to, each bound once under a name."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {}

    def bind(self, value: Any) -> str:
        name = f"_g{len(self.ns)}"
        self.ns[name] = value
        return name

    def test(self, node: Node, x: str) -> str:
        """The source of ``node.ok(x)`` for the local ``x``: the node's template, or a call."""
        template = node.test
        if template is None:
            return f"{self.bind(node.ok)}({x})"
        from stead.core.codec import Node  # codec imports this module

        values: Mapping[str, Any] = node.names or {}
        filled = {
            k: self.test(v, x) if isinstance(v, Node) else self.bind(v) for k, v in values.items()
        }
        return template.format(x=x, **filled)

    def function(self, name: str, body: list[str], params: str = "v") -> Callable[..., Any]:
        """Compile ``def name(params):`` with ``body`` (lines, nested ones indented)."""
        source = f"def {name}({params}):\n" + "".join(f"    {line}\n" for line in body)
        exec(source, self.ns)  # generated from templates and field names only
        return self.ns.pop(name)  # type: ignore[no-any-return]


def compile_ok(
    cls: type[Any], table: Table, rule: Callable[[Any], Problem] | None, trusted: bool
) -> Callable[[Any], bool]:
    """The write check of a record: its type, then every field's test, then ``rule``."""
    src = _Source()
    lines = [f"if type(v) is not {src.bind(cls)}:", "    return False"]
    tests = []
    if not trusted:
        for i, (name, node, _, _) in enumerate(table):
            lines.append(f"_{i} = v.{name}")
            tests.append(src.test(node, f"_{i}"))
        if rule is not None:
            tests.append(f"{src.bind(rule)}(v) is None")
    lines.append(f"return {' and '.join(f'({t})' for t in tests) or 'True'}")
    return src.function("ok", lines)


def compile_enc(table: Table, written: set[str | None]) -> Callable[[Any], JSON]:
    """The encoder of a record: the fields always written in one dict display (in field
    order, converted by their node's ``enc`` where it has one), then each other field when it
    differs from its default (the reader restores those)."""
    src = _Source()

    def value(node: Node, x: str) -> str:
        if node.each is not None:
            return f"list(map({src.bind(node.each)}, {x}))"
        return x if node.enc is None else f"{src.bind(node.enc)}({x})"

    shown = [(n, node) for n, node, required, _ in table if required or n in written]
    items = ", ".join(f"{n!r}: {value(node, f'v.{n}')}" for n, node in shown)
    lines = [f"d = {{{items}}}"]
    for n, node, required, default in table:
        if not (required or n in written):
            lines += [f"x = v.{n}", f"if x != {src.bind(default)}:"]
            lines.append(f"    d[{n!r}] = {value(node, 'x')}")
    lines.append("return d")
    return src.function("enc", lines)


def compile_copy(source: type[Any], target: type[T], *more: str) -> Callable[..., T]:
    """``target`` built from the fields of a ``source`` it has too, and keywords ``more``.

    Where one record carries another's fields on (a call's state from its request, a verdict
    from its target), the shared names are found once from the two dataclasses and the copy
    is one straight-line call with named keywords (no ``**``: a plain vectorcall), as fast as
    writing ``name=v.name`` for each by hand."""
    theirs = {f.name for f in fields(source)}
    shared = [f.name for f in fields(target) if f.name in theirs]  # type: ignore[arg-type]
    src = _Source()
    items = ", ".join([*(f"{n}=v.{n}" for n in shared), *(f"{n}={n}" for n in more)])
    params = ", ".join(["v", *(["*", *more] if more else [])])
    return src.function("copy", [f"return {src.bind(target)}({items})"], params)
