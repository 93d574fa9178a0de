"""Builders of the notes a drive records for observers: a tool source's listing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from stead.core.canonical import digest
from stead.core.events import Event, ToolsListed


def listing_events(history: Iterable[Event], listings: Mapping[str, dict[str, Any]]) -> list[Event]:
    """A ``tools_listed`` for each source (name -> its tools' definitions) whose tools differ
    from its last listing in ``history``: a drive of an unchanged server records nothing."""
    last: dict[str, str] = {}
    for e in history:
        if isinstance(e, ToolsListed):
            last[e.source] = digest(e.tools)
    return [
        ToolsListed(source=name, tools=dict(tools))
        for name, tools in listings.items()
        if last.get(name) != digest(tools)
    ]
