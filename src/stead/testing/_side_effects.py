"""Tools for asserting what happened in the world, across processes and crashes.

``SideEffects`` is where the tools of a test write down each real side effect. It lives in
its own SQLite file, outside the run store, so it survives SIGKILL of the process that ran the
tool and tells the truth the run log may not know yet ("the email left, the result was never
checkpointed").
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from typing import Any

from stead.core.fold import RunState
from stead.core.messages import AssistantMessage, ToolResultMessage
from stead.core.states import RunStatus


class SideEffects:
    """A cross-process record of side effects: (effect name, key, detail)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        with self._db() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY, effect TEXT NOT NULL,"
                " key TEXT NOT NULL, detail TEXT NOT NULL, pid INTEGER NOT NULL)"
            )

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def record(self, effect: str, key: str, **detail: Any) -> int:
        """Write down that ``effect`` happened with ``key``; durable when this returns."""
        db = self._db()
        try:
            cur = db.execute(
                "INSERT INTO effects (effect, key, detail, pid) VALUES (?, ?, ?, ?)",
                (effect, key, json.dumps(detail, sort_keys=True), os.getpid()),
            )
            return int(cur.lastrowid or 0)
        finally:
            db.close()

    def entries(self, effect: str | None = None) -> list[dict[str, Any]]:
        """Every recorded effect (optionally of one name), oldest first."""
        db = self._db()
        try:
            q = "SELECT id, effect, key, detail, pid FROM effects"
            rows = (
                db.execute(q + " WHERE effect = ? ORDER BY id", (effect,)).fetchall()
                if effect
                else db.execute(q + " ORDER BY id").fetchall()
            )
        finally:
            db.close()
        return [
            {"id": r[0], "effect": r[1], "key": r[2], "detail": json.loads(r[3]), "pid": r[4]}
            for r in rows
        ]

    def count(self, effect: str, key: str | None = None) -> int:
        """How many times ``effect`` (with ``key``, if given) happened."""
        return sum(1 for e in self.entries(effect) if key is None or e["key"] == key)

    def keys(self, effect: str) -> list[str]:
        """The keys ``effect`` was performed with, in order."""
        return [e["key"] for e in self.entries(effect)]

    def assert_exactly_once(self, effect: str, key: str | None = None) -> None:
        """Fail unless ``effect`` happened exactly once (per key, if given)."""
        n = self.count(effect, key)
        if n != 1:
            which = f" with key {key}" if key else ""
            raise AssertionError(f"{effect}{which} happened {n} times, expected exactly once")


def assert_valid_history(state: RunState) -> None:
    """Every tool call in the conversation has exactly one result (Guarantee 4)."""
    wanted: Counter[str] = Counter()
    got: Counter[str] = Counter()
    for m in state.conversation():
        if isinstance(m, AssistantMessage):
            extra = [k for k, v in (wanted - got).items() if v]
            if extra:
                raise AssertionError(f"tool calls without a result before a new turn: {extra}")
            wanted, got = Counter(c.id for c in m.tool_calls), Counter()
        elif isinstance(m, ToolResultMessage):
            got[m.tool_call_id] += 1
    missing = wanted - got
    dupes = [k for k, v in got.items() if v > 1]
    unknown = [k for k in got if k not in wanted]
    if (missing and state.status is RunStatus.COMPLETED) or dupes or unknown:
        raise AssertionError(
            f"invalid history: missing={sorted(missing)} duplicated={dupes} unanswered={unknown}"
        )
