"""The migrations of both stores: one source per version where the schema is the same.

A migration that both dialects share lives once in ``migrations/shared/NNNN_name.sql`` and
is rendered for each dialect; one that differs in substance (0002: SQLite moved an index off
the append path, PostgreSQL packed its snapshots) lives in ``migrations/<dialect>/``. A shared
source speaks the dialects through two small devices:

* a type token where the types differ: ``{BIGINT}`` (SQLite ``INTEGER``), ``{DOUBLE}``
  (``REAL``), ``{BYTES}`` (``BLOB`` / ``BYTEA``) and ``{WITHOUT_ROWID}`` (SQLite's table
  option, nothing on PostgreSQL);
* a line that begins ``@sqlite `` or ``@postgres `` belongs to that dialect alone (a bare
  ``@postgres`` is an empty line of PostgreSQL's).

An applied migration's text must never change (a store migrated by an older stead runs
what it ran), so the rendering of 0001, 0003 and 0004 is pinned byte for byte to the files
each dialect had before they were merged (tests/store/test_store_fixtures.py).
"""

from __future__ import annotations

import re
from importlib import resources

DIALECTS = ("sqlite", "postgres")

_TOKENS = {
    "sqlite": {
        "BIGINT": "INTEGER",
        "DOUBLE": "REAL",
        "BYTES": "BLOB",
        "WITHOUT_ROWID": " WITHOUT ROWID",
    },
    "postgres": {
        "BIGINT": "BIGINT",
        "DOUBLE": "DOUBLE PRECISION",
        "BYTES": "BYTEA",
        "WITHOUT_ROWID": "",
    },
}
_TOKEN = re.compile(r"\{(BIGINT|DOUBLE|BYTES|WITHOUT_ROWID)\}")


def render(source: str, dialect: str) -> str:
    """The text of a shared migration ``source`` for ``dialect``."""
    tokens = _TOKENS[dialect]
    out = []
    for line in source.splitlines(keepends=True):
        if line.startswith("@"):
            mark, _, rest = line[1:].partition(" ")
            mark = mark.rstrip("\n")
            if mark not in _TOKENS:
                raise ValueError(f"unknown dialect mark in a migration: {line!r}")
            if mark != dialect:
                continue
            line = rest or "\n"
        out.append(_TOKEN.sub(lambda m: tokens[m.group(1)], line))
    return "".join(out)


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration for ``dialect``, in order: the shared ones
    rendered, and the dialect's own. ``ValueError`` when a version stands twice (two
    branches that each added one, or a shared version a dialect also writes)."""
    root = resources.files("stead.store.sql") / "migrations"
    out: dict[int, tuple[int, str, str]] = {}
    for folder in ("shared", dialect):
        for entry in (root / folder).iterdir():
            if not entry.name.endswith(".sql"):
                continue
            number, _, rest = entry.name.partition("_")
            text = entry.read_text("utf-8")
            version = int(number)
            if version in out:
                raise ValueError(f"migration {version} stands twice for {dialect}: {entry.name}")
            sql = render(text, dialect) if folder == "shared" else text
            out[version] = (version, rest.removesuffix(".sql"), sql)
    return [out[v] for v in sorted(out)]


def statements(sql: str) -> list[str]:
    """Split a migration file into statements (our files hold no ';' inside literals, and
    none inside a ``$$``-quoted body but a PostgreSQL ``DO`` block's, kept whole)."""
    lines = [ln for ln in sql.splitlines() if not ln.strip().startswith("--")]
    out: list[str] = []
    for i, part in enumerate("\n".join(lines).split("$$")):
        if i % 2:  # inside $$ ... $$: part of the statement under way
            out[-1] += f"$${part}$$"
            continue
        pieces = part.split(";")
        if out and i:
            out[-1] += pieces.pop(0)
        out += pieces
    return [s.strip() for s in out if s.strip()]
