"""Stores: where runs live. ``open_store(url)`` picks the backend from the URL.

What the other packages of stead use of the stores is exported here, and they import only
this (and the dialects' public names, ``stead.store.sqlite.SQLiteStore`` and
``stead.store.postgres.PostgresStore``): the ``Store`` contract, conversations, and the
execution ledger. The PostgreSQL side is imported only when a ``postgresql://`` URL is
opened, so ``import stead`` works without psycopg."""

from __future__ import annotations

from pathlib import Path

from stead.errors import UserError
from stead.store.ledger import (
    Claimed,
    Ledger,
    Placement,
    forget_progress,
    give_up_strays,
    ledger_for,
    open_shared_progress,
    pause_queue,
    placements,
    progress_frames,
    publish_progress,
    set_queue_limit,
    shared_progress_frames,
)
from stead.store.sql import (
    CLAIMABLE,
    Claim,
    ConversationEntry,
    ConversationStore,
    Loaded,
    RunQuery,
    RunRecord,
    RunSearch,
    Store,
    StoredEvent,
    is_transient,
)
from stead.store.sqlite import SQLiteStore

FORMS = "sqlite:///relative/path.db, sqlite:////absolute/path.db or postgresql://user@host/db"
"""The store URLs ``open_store`` takes, for messages."""


def open_store(url: str | Path, *, create: bool = True) -> Store:
    """Open the store a URL names.

    ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or a bare file path;
    ``postgresql://user@host:port/db`` (or ``postgres://``) with ``stead[postgres]``.

    Refused with a ``UserError``, before anything is opened: an empty URL (``STEAD_STORE=``
    set to nothing; SQLite would open a private temporary database, so runs would "succeed"
    and vanish when the process ends), ``sqlite://`` or ``sqlite:///`` without a path, a
    folder, an unknown scheme, a path UTF-8 cannot encode, and ``:memory:`` (bare or as
    ``sqlite:///:memory:``). A store must be shared by
    every process that drives or inspects its runs, and an in-memory database is seen by one
    connection of one process only; tests use a file in a temporary folder.

    ``create=False`` refuses a SQLite file that does not exist (a ``UserError`` naming it)
    instead of creating an empty store: for commands that only read or steer existing runs.
    """
    if not isinstance(url, str | Path):
        raise UserError(f"a store URL is a str or a Path, not {type(url).__name__}; use {FORMS}")
    text = str(url).strip() if isinstance(url, str) else str(url)
    if not text:
        raise UserError(
            f"the store URL is empty (is $STEAD_STORE or --store set to nothing?); use {FORMS}"
        )
    if text.startswith(("postgresql://", "postgres://")):
        try:
            from stead.store.postgres import PostgresStore
        except ImportError as exc:
            raise UserError(
                f"a PostgreSQL store needs psycopg: pip install 'stead[postgres]' ({exc})"
            ) from exc
        return PostgresStore(text)
    if text.startswith("sqlite:"):
        if not text.startswith("sqlite:///"):
            raise UserError(f"bad SQLite URL {text!r}; write sqlite:///path/to/file.db")
        path = text.removeprefix("sqlite:///")
        if not path:
            raise UserError(
                f"the SQLite URL {text!r} names no file; write sqlite:///path/to/file.db"
            )
    elif "://" in text or text.split(":", 1)[0] in _SCHEMES:
        scheme = text.split(":", 1)[0]
        raise UserError(f"unsupported store {scheme!r}; use {FORMS}")
    else:
        path = text
    if path == ":memory:":
        raise UserError(
            f"{text!r} is an in-memory database, which one connection of one process sees "
            "and which is gone when it closes; stead needs a file every process can open "
            "(in tests, one in a temporary folder): sqlite:///path/to/file.db"
        )
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(
            f"the store path {text!r} cannot be encoded as UTF-8 ({exc.reason}); name a file "
            "whose path is text"
        ) from exc
    if "\x00" in path:
        raise UserError(f"the store path {text!r} holds a NUL character; name a file")
    try:
        folder = Path(path).is_dir()
    except OSError as exc:  # a name too long for the file system, a path it cannot search
        raise UserError(f"the store path cannot be used: {exc.strerror}; name a file") from exc
    if folder:
        raise UserError(
            f"store {text!r} is a folder; name a file in it, e.g. sqlite:///{path.rstrip('/')}/stead.db"
        )
    return SQLiteStore(path, create=create)


_SCHEMES = frozenset({"postgresql", "postgres", "mysql", "redis", "http", "https", "memory"})
"""Schemes written without ``//`` that are clearly not a file name."""


__all__ = [
    "CLAIMABLE",
    "Claim",
    "Claimed",
    "ConversationEntry",
    "ConversationStore",
    "Ledger",
    "Loaded",
    "Placement",
    "RunQuery",
    "RunRecord",
    "RunSearch",
    "SQLiteStore",
    "Store",
    "StoredEvent",
    "forget_progress",
    "give_up_strays",
    "is_transient",
    "ledger_for",
    "open_shared_progress",
    "open_store",
    "pause_queue",
    "placements",
    "progress_frames",
    "publish_progress",
    "set_queue_limit",
    "shared_progress_frames",
]
