"""The export format: runs as JSON Lines, one record a line (docs/lifecycle.md).

A file is a header line, records, and an end line that counts them, so a file cut short is
told from a whole one. Every record is a JSON object whose ``type`` says which row of the
store it is; its fields are the row's columns, in a fixed order, so the same store content
always writes the same bytes (a round trip export, import, export is byte-identical).

``FORMAT`` is the version written. A reader refuses a newer one rather than guess at it; a
change of a record's fields is a new version, and an older file is read by the rules of its
own version. This module only writes and checks lines (pure); the stores read and write the
rows (``stead.store``), and every imported event is decoded by the reader's event codec
before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from stead.core.canonical import compact_encoder

FORMAT: Final = 1
"""The export format version this code writes (and the newest it reads)."""

MAGIC: Final = "stead_export"
"""The header's key: ``{"stead_export": FORMAT}``."""

_INT = (int,)
_NUM = (int, float)
_STR = (str,)
_OPT_STR = (str, type(None))

RECORDS: Final[Mapping[str, Mapping[str, tuple[type, ...]]]] = {
    "run": {
        "run_id": _STR,
        "agent": _STR,
        "session_id": _STR,
        "correlation_id": _STR,
        "status": _STR,
        "last_seq": _INT,
        "created_at": _NUM,
        "updated_at": _NUM,
    },
    "event": {
        "run_id": _STR,
        "seq": _INT,
        "kind": _STR,
        "version": _INT,
        "created_at": _NUM,
        "data": (dict,),
    },
    "link": {"run_id": _STR, "source_id": _STR, "kind": _STR},
    "message": {
        "conversation_id": _STR,
        "position": _INT,
        "message_id": _STR,
        "run_id": _STR,
        "agent": _STR,
        "input": (dict,),
        "created_at": _NUM,
    },
    "blob": {"digest": _STR, "media_type": _STR, "created_at": _NUM, "data": _STR},
    "effect": {
        "effect_id": _STR,
        "run_id": _STR,
        "session_id": _STR,
        "origin": _STR,
        "kind": _OPT_STR,
        "queue": _OPT_STR,
        "assignment": _OPT_STR,
        "phase": _STR,
        "epoch": _INT,
        "executor": _OPT_STR,
        "position": _INT,
        "cancel": _INT,
        "outcome": _OPT_STR,
        "created_at": _NUM,
        "updated_at": _NUM,
    },
    "effect_event": {
        "effect_id": _STR,
        "seq": _INT,
        "kind": _STR,
        "data": _STR,
        "created_at": _NUM,
    },
    "end": {"runs": _INT, "records": _INT},
}
"""Each record type and its fields, in the order they are written. ``blob.data`` is base64;
an ``effect``'s ``assignment`` and ``outcome`` and an ``effect_event``'s ``data`` are the
ledger's JSON text as stored (the ledger's own codec reads them)."""

_ENCODE = compact_encoder(sort_keys=False)


def header() -> str:
    """The first line of a file (without its newline)."""
    return _ENCODE({MAGIC: FORMAT})


def line(kind: str, /, **fields: Any) -> str:
    """One record as a line (without its newline): ``type`` first, then ``RECORDS[kind]``'s
    fields in their order. ``ValueError`` for a field missing, unknown or of the wrong type:
    what is written can be read back."""
    record = {"type": kind, **{name: fields.get(name) for name in RECORDS[kind]}}
    problem = _problem(kind, fields)
    if problem:
        raise ValueError(f"{kind} record: {problem}")
    return _ENCODE(record)


def read_header(text: str) -> int:
    """The format version of a file's first line; ``ValueError`` for anything that is not
    a header this code reads (not one, or a newer format)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not a stead export (the first line is not JSON: {exc})") from exc
    if not isinstance(value, dict) or set(value) != {MAGIC}:
        raise ValueError(f'not a stead export (the first line is not {{"{MAGIC}": N}})')
    version = value[MAGIC]
    if type(version) is not int or version < 1:
        raise ValueError(f"not a stead export (format {version!r} is not a version number)")
    if version > FORMAT:
        raise ValueError(
            f"written in export format {version}, newer than this stead reads ({FORMAT}); "
            "import it with a newer stead"
        )
    return version


def read_line(text: str) -> dict[str, Any]:
    """One record line, checked against ``RECORDS``: ``ValueError`` saying what is wrong."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ValueError("a record is a JSON object")
    kind = value.pop("type", None)
    if kind not in RECORDS:
        raise ValueError(f"unknown record type {kind!r} (known: {', '.join(RECORDS)})")
    problem = _problem(kind, value)
    if problem:
        raise ValueError(f"{kind} record: {problem}")
    value["type"] = kind
    return value


def _problem(kind: str, fields: Mapping[str, Any]) -> str | None:
    spec = RECORDS[kind]
    unknown = sorted(set(fields) - set(spec))
    if unknown:
        return f"unknown field {unknown[0]!r}"
    for name, types in spec.items():
        if name not in fields:
            return f"field {name!r} is missing"
        value = fields[name]
        if isinstance(value, bool) or not isinstance(value, types):
            want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            return f"field {name!r} is {type(value).__name__}, not {want}"
    return None
