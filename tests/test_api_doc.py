"""docs/api.md is generated from ``stead.__all__``: every public name, its signature and the
first line of its docstring, so the reference cannot miss a name or show an old signature.
Its blocks are ``py``, not ``python``: signatures, not code for tests/test_docs.py to run.

After adding or changing a public name, regenerate it with one
command and commit the result:

    STEAD_UPDATE_API=1 .venv/bin/python -m pytest -q tests/test_api_doc.py
"""

from __future__ import annotations

import enum
import inspect
import os
import re
import typing
from pathlib import Path
from typing import Any

import stead

ROOT = Path(__file__).resolve().parents[1]
API_MD = ROOT / "docs" / "api.md"
UPDATE = os.environ.get("STEAD_UPDATE_API") == "1"
COMMAND = "STEAD_UPDATE_API=1 .venv/bin/python -m pytest -q tests/test_api_doc.py"


def _first_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ").strip()


def _annotation(a: Any) -> str:
    # Annotations are strings here (``from __future__ import annotations``): as written in
    # the source, which is what a reader wants, not the evaluated, module-qualified type.
    return a if isinstance(a, str) else inspect.formatannotation(a)


def _default(value: Any) -> str:
    # A default's repr with no memory address in it (the file must be the same every run).
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def _signature(obj: Any, *, skip_self: bool = False, returns: bool = True) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(*args: object)"  # an exception that takes BaseException's arguments
    parts: list[str] = []
    star_done = False
    for i, p in enumerate(sig.parameters.values()):
        if skip_self and i == 0 and p.name in ("self", "cls"):
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
        if p.kind in (p.VAR_POSITIONAL, p.KEYWORD_ONLY):
            star_done = True
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        text = prefix + p.name
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += (" = " if p.annotation is not p.empty else "=") + _default(p.default)
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (
            i + 1 == len(sig.parameters)
            or list(sig.parameters.values())[i + 1].kind is not p.POSITIONAL_ONLY
        ):
            parts.append("/")
    out = f"({', '.join(parts)})"
    if returns and sig.return_annotation is not sig.empty:
        out += f" -> {_annotation(sig.return_annotation)}"
    return out


def _members(cls: type) -> list[tuple[str, Any]]:
    """The public methods and properties of a class, its own and those of its bases in stead
    (``Runtime``'s steering methods live in a mixin); an exception's are left out."""
    if issubclass(cls, BaseException):
        return []
    found: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for base in cls.__mro__:
        if base.__module__.split(".")[0] != "stead":
            continue
        for name, value in vars(base).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property):
                found.append((name, value))
    return found


def _entry(name: str, obj: Any) -> list[str]:
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        values = ", ".join(f"`{m.value}`" for m in obj)
        return [f"### `{name}`", "", f"Enum: {values}.", "", _first_line(obj), ""]
    if isinstance(obj, type):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        base = ""
        if kind == "exception":
            base = f" ({obj.__mro__[1].__name__})"
        lines = [f"### `{name}`{base}", "", "```py"]
        lines.append(f"{kind} {name}{_signature(obj, returns=False)}")
        for member, value in _members(obj):
            if isinstance(value, property):
                lines.append(f"    {member}  # property")
            else:
                asynch = "async " if inspect.iscoroutinefunction(value) else ""
                lines.append(f"    {asynch}def {member}{_signature(value, skip_self=True)}")
        lines += ["```", "", _first_line(obj), ""]
        docs = [f"- `{m}`: {_first_line(v)}" for m, v in _members(obj) if _first_line(v)]
        return [*lines, *docs, *([""] if docs else [])]
    if callable(obj):
        asynch = "async " if inspect.iscoroutinefunction(obj) else ""
        # An overloaded function is shown as its overloads: what a caller may write.
        forms = typing.get_overloads(obj) or [obj]
        sigs = [f"{asynch}def {name}{_signature(f)}" for f in forms]
        return [f"### `{name}`", "", "```py", *sigs, "```", "", _first_line(obj), ""]
    return [f"### `{name}`", "", f"`{name} = {obj!r}`", ""]


def generate() -> str:
    """docs/api.md from ``stead.__all__``, in its order."""
    lines = [
        "# API reference",
        "",
        "Every public name of `stead` (`stead.__all__`), with its signature and the first line",
        "of its docstring. Generated by `tests/test_api_doc.py`; do not edit by hand. After a",
        f"change to a public name: `{COMMAND}`.",
        "",
    ]
    for name in stead.__all__:
        lines += _entry(name, getattr(stead, name))
    return "\n".join(lines).rstrip("\n") + "\n"


def test_docs_api_md_is_generated_from_stead_all() -> None:
    generated = generate()
    if UPDATE:
        API_MD.write_text(generated)
        return
    assert API_MD.exists() and API_MD.read_text() == generated, (
        f"docs/api.md is not what stead.__all__ generates; {COMMAND} rewrites it"
    )


def test_every_public_name_is_in_the_reference() -> None:
    text = generate()
    for name in stead.__all__:
        assert f"### `{name}`" in text, name
