"""The rows of the store for the events of ``stead.core.events``: one codec record per kind.

``encode`` turns an event into ``(kind, version, json_dict)``; ``decode`` is its inverse and
refuses anything it does not recognise (unknown kind, newer version, missing or mistyped
field) with ``ValueError``, so the store can report the exact corrupt row. Each kind's
``Record``, compiled once from its field table (``stead.core.codec``), is the encoder, the
reader and the writer's check, so ``problem`` applies to a live event exactly the rules
``decode`` applies to its row: whatever a store accepted reads back equal.

Versioning: ``VERSION[kind]`` is the schema version written today. A row of an older version
is upgraded by the upcasters of ``_UPGRADES`` (a ``codec.Versions`` per kind) before it is
read; a newer version than this code knows is refused, not guessed at. Adding an event needs
nothing here: its fields are its codec.
"""

from __future__ import annotations

import typing
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Final

from stead.core.canonical import JSON
from stead.core.codec import NUL_FREE_STR, Record, Upcaster, Versions, integer
from stead.core.events import EVENT_TYPES, RunCompleted
from stead.core.messages import unstorable
from stead.core.output import JSON_VALUE

if TYPE_CHECKING:
    from stead.core.events import Event

VERSION: Final[dict[str, int]] = {k: 1 for k in EVENT_TYPES}

_UPGRADES: Final[dict[tuple[str, int], Upcaster]] = {}
"""(kind, old_version) -> function(dict) -> dict of the next version. Empty at v1."""

_VERSIONS: Final = {
    k: Versions(k, VERSION[k], {v: f for (kind, v), f in _UPGRADES.items() if kind == k})
    for k in EVENT_TYPES
}

_COLUMNS: Final = {"tool_call_id", "run_id", "agent", "session_id", "correlation_id"}
"""Fields also stored in a text column of their own: PostgreSQL text cannot hold NUL."""
TURN_INDEX: Final = integer(0, 2**31)
"""``turn_index`` is also a column of its own, an INTEGER (32 bits) in PostgreSQL."""


def _record(cls: type[Any]) -> Record:
    """An event's codec: its fields by their types, and the rules of the columns they fill."""
    nodes = {f.name: NUL_FREE_STR for f in fields(cls) if f.name in _COLUMNS}
    if "turn_index" in {f.name for f in fields(cls)}:
        nodes["turn_index"] = TURN_INDEX
    if cls is RunCompleted:
        nodes["data"] = JSON_VALUE  # any JSON value: no type hint says that
    return Record(cls, nodes=nodes, label=cls.kind)


RECORDS: Final[dict[str, Record]] = {k: _record(t) for k, t in EVENT_TYPES.items()}
"""Each kind's codec: the row's data (``encode``), its reader (``decode``), and the writer's
check (``problem``) are the same record, so what the store accepts reads back equal."""
_ENCODERS: Final = {k: (VERSION[k], r.enc) for k, r in RECORDS.items()}
_CHECKS: Final = {r.cls: r for r in RECORDS.values()}
WRITERS: Final = {
    r.cls: (
        k,
        VERSION[k],
        r.ok,
        typing.cast(typing.Callable[[Any], dict[str, JSON]], r.enc),
        r.checked,
    )
    for k, r in RECORDS.items()
}
"""Per event class: its kind, version, check, encoder and its checked text (the encoder's
compact JSON text written directly when the check passes, else None: ``Record.checked``),
for a store's hot path (one lookup and one call for the check and the row together;
``problem`` explains a refusal)."""


def encode(event: Event) -> tuple[str, int, dict[str, JSON]]:
    """Return ``(kind, version, data)`` where data is plain JSON (defaults left out)."""
    version, enc = _ENCODERS[event.kind]
    return event.kind, version, enc(event)  # type: ignore[misc]


def decode(kind: str, version: int, data: Any) -> Event:
    """Rebuild an event; ``ValueError`` says exactly what is wrong with the row. A row of an
    older version is upgraded first; a newer one is refused."""
    record = RECORDS.get(kind)
    if record is None:
        raise ValueError(f"unknown event kind {kind!r}")
    if not isinstance(data, dict):
        raise ValueError("event data is not a JSON object")
    return typing.cast("Event", record.dec(_VERSIONS[kind].upcast(version, data)))


def problem(event: Any) -> tuple[str, str] | None:
    """``(field, what is wrong)`` when ``decode`` would not read ``event`` back equal after
    ``encode``, else None: the event's own record, checked. Text UTF-8 cannot hold is
    checked on the encoded row instead (``unstorable_field``): one O(1) test there covers
    every string."""
    record = _CHECKS.get(type(event))
    if record is None:
        return "kind", f"{type(event).__name__} is not an event class"
    if record.ok(event):
        return None
    return record.field_problem(event) or ("?", "refused")  # pragma: no branch


def unstorable_field(data: dict[str, JSON]) -> str:
    """The name of the first field of encoded ``data`` holding text UTF-8 cannot encode."""
    for name, value in data.items():
        if _has_unstorable(value):
            return name
    return "?"  # pragma: no cover - only called once the row is known to hold one


def _has_unstorable(value: Any) -> bool:
    if isinstance(value, str):
        return unstorable(value)
    if isinstance(value, dict):
        return any(_has_unstorable(k) or _has_unstorable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_unstorable(v) for v in value)
    return False
