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
from dataclasses import MISSING, fields
from typing import Any, TypeVar

from stead.core._node import Each, Node, Problem
from stead.core.canonical import JSON, compact_encoder

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
        values: Mapping[str, Any] = node.names or {}
        filled = {
            k: self.test(v, x) if isinstance(v, Node) else self.bind(v) for k, v in values.items()
        }
        return template.format(x=x, **filled)

    def text(self, node: Node, x: str) -> str:
        """The source of ``node``'s JSON text of the local ``x``: the node's template, or its
        JSON value (``enc``) through the compact encoder."""
        template = node.text
        if template is None:
            dumps = self.bind(_DUMPS)
            return f"{dumps}({x})" if node.enc is None else f"{dumps}({self.bind(node.enc)}({x}))"
        filled = {}
        for k, v in (node.text_names or {}).items():
            if isinstance(v, Node):
                filled[k] = self.text(v, x)
            elif isinstance(v, Each):
                filled[k] = self.bind(text_function(v.node))
            else:
                filled[k] = self.bind(v)
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


_DUMPS = compact_encoder(sort_keys=False)
"""What a node without a text template is written with: the row's compact encoder."""


def text_function(node: Node) -> Callable[[Any], str]:
    """``node``'s JSON text as a function of one value: its own where the template is one
    call (a string's, an integer's, a record's), else compiled from the template."""
    if node.text == "{f}({x})" and node.text_names is not None:
        return node.text_names["f"]  # type: ignore[no-any-return]
    src = _Source()
    return src.function("text", [f"return {src.text(node, 'v')}"])


def compile_text(table: Table, written: set[str | None]) -> Callable[[Any], str]:
    """The JSON text of a record, exactly as the compact encoder writes ``compile_enc``'s dict
    (the same keys in the same order), built without the dict: each field's text from its
    node (``Node.text``), the fields always written in one f-string, each other one added
    when it differs from its default. One encoding of an event, not a dict and then its
    text, on every append."""
    src = _Source()
    lines = [f"_{i} = v.{n}" for i, (n, *_) in enumerate(table)]
    texts = {i: src.text(node, f"_{i}") for i, (_, node, *_) in enumerate(table)}
    return src.function("text", [*lines, *_written(src, table, written, texts)])


def compile_checked_text(
    cls: type[Any],
    table: Table,
    written: set[str | None],
    rule: Callable[[Any], Problem] | None,
    trusted: bool,
) -> Callable[[Any], str | None]:
    """``compile_ok`` and ``compile_text`` in one pass: the record's JSON text when its check
    passes, else None. A store checks every event it writes and then writes its text; one
    function reads each field once, and a field that is a record itself (or a sequence of
    them) is checked and written by that record's own checked text, one call, not two. The
    rule across fields runs, as in ``compile_ok``, once every field passed."""
    src = _Source()
    lines = [f"if type(v) is not {src.bind(cls)}:", "    return None"]
    texts: dict[int, str] = {}
    for i, (name, node, _, _) in enumerate(table):
        lines.append(f"_{i} = v.{name}")
        if trusted:  # its constructor enforced every rule: its type is the whole check
            texts[i] = src.text(node, f"_{i}")
        elif node.checked is not None:
            checked = src.bind(node.checked)
            lines += [f"t{i} = {checked}(_{i})", f"if t{i} is None:", "    return None"]
            texts[i] = f"t{i}"
        else:
            lines += [f"if not ({src.test(node, f'_{i}')}):", "    return None"]
            texts[i] = src.text(node, f"_{i}")
    if rule is not None and not trusted:
        lines += [f"if {src.bind(rule)}(v) is not None:", "    return None"]
    return src.function("checked_text", [*lines, *_written(src, table, written, texts)])


def _written(
    src: _Source, table: Table, written: set[str | None], texts: Mapping[int, str]
) -> list[str]:
    """The lines that return a record's text from its fields' values (``_i``) and the text
    expression of each (``texts``): the fields always written in one f-string, each other
    one added when it differs from its default."""
    shown = [i for i, (n, _, required, _) in enumerate(table) if required or n in written]
    rest = [i for i in range(len(table)) if i not in shown]
    lines = [f"_{i} = {texts[i]}" for i in shown]
    body = ",".join(f'"{table[i][0]}":{{_{i}}}' for i in shown)
    if not rest:
        return [*lines, f"return f'{{{{{body}}}}}'"]
    lines.append(f"s = f'{{{{{body}'" if shown else "s = '{'")
    for i in rest:
        n, default = table[i][0], table[i][3]
        lines.append(f"if _{i} != {src.bind(default)}:")
        key = f'"{n}":'
        if shown:
            lines.append(f"    s += {',' + key!r} + {texts[i]}")
        else:  # the first field written takes no comma
            lines.append(f"    s += ({key!r} if len(s) == 1 else {',' + key!r}) + {texts[i]}")
    lines.append("return s + '}'")
    return lines


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


def fast_init(cls: type[T]) -> type[T]:
    """Give a frozen, slotted dataclass an ``__init__`` that fills its slots directly.

    A frozen dataclass's own ``__init__`` sets each field with ``object.__setattr__(self,
    name, value)``: a global lookup, a call and a search of the class for the name, per
    field, on every event, step, message and effect the core builds (a few dozen a step).
    This one calls each slot's descriptor (``__set__``, looked up once), 2-3x faster; the
    class is otherwise untouched (still frozen: assignment after ``__init__`` raises). The
    signature is the original's (names, kinds, defaults, annotations); defaults and
    ``default_factory`` fields are filled as ``dataclasses`` fills them, then
    ``__post_init__`` runs if the class has one. A class it cannot do that for (no slots of
    its own, ``InitVar`` parameters, a field without a slot) keeps its own ``__init__``.
    """
    old: Any = cls.__init__
    code = getattr(old, "__code__", None)
    own = cls.__dict__
    if code is None or "__dataclass_fields__" not in own or "__slots__" not in own:
        return cls
    positional = code.co_argcount - 1  # after self
    params = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    every = fields(cls)  # type: ignore[arg-type]
    if [f.name for f in every if f.init] != list(params):
        return cls  # InitVar parameters (no field of their own), or a shape not known here
    pairs = zip(reversed(params[:positional]), reversed(old.__defaults__ or ()), strict=False)
    defaults = {**dict(pairs), **(old.__kwdefaults__ or {})}
    src = _Source()
    lines = []
    for f in every:
        slot: Any = next((k.__dict__[f.name] for k in cls.__mro__ if f.name in k.__dict__), None)
        if type(slot).__name__ != "member_descriptor":
            return cls
        put, make = src.bind(slot.__set__), f.default_factory
        if f.init and callable(make) and f.name in defaults:  # its default is the marker
            marker = src.bind(defaults[f.name])
            value = f"{src.bind(make)}() if {f.name} is {marker} else {f.name}"
        elif f.init:
            value = f.name
        elif callable(make):
            value = f"{src.bind(make)}()"
        elif f.default is not MISSING:
            value = src.bind(f.default)
        else:
            continue  # init=False without a default: dataclasses leaves it unset too
        lines.append(f"{put}(self, {value})")
    if hasattr(cls, "__post_init__"):
        lines.append("self.__post_init__()")
    keywords = params[positional:]
    signature = ", ".join(["self", *params[:positional], *(["*", *keywords] if keywords else [])])
    new = src.function("__init__", lines or ["pass"], signature)
    new.__defaults__ = old.__defaults__
    new.__kwdefaults__ = old.__kwdefaults__
    new.__annotations__ = old.__annotations__
    new.__qualname__ = old.__qualname__
    new.__doc__ = old.__doc__
    setattr(cls, "__init__", new)  # noqa: B010 - mypy refuses assigning a method
    return cls
