"""A run's life after it is recorded, in the SQL stores: export (``_transfer``) and import
(``_import``), pruning (``_retention``), forks (``_fork``) and agent-version pins
(``_versions``). Imports the shared SQL (``stead.store.sql``), no dialect: what differs
between the dialects here (a transaction of several statements) is asked of the store."""

from stead.store.lifecycle._fork import create_fork
from stead.store.lifecycle._import import Imported, Parsed, copy_store, parse, write
from stead.store.lifecycle._retention import (
    Judged,
    delete,
    judge,
    payloads,
    sweep_blobs,
    sweep_shared_progress,
    vacuum,
)
from stead.store.lifecycle._transfer import atomic, export_lines, q, select_runs, sql_store
from stead.store.lifecycle._versions import Stranded, announce, pin, retire, stranded

__all__ = [
    "Imported",
    "Judged",
    "Parsed",
    "Stranded",
    "announce",
    "atomic",
    "copy_store",
    "create_fork",
    "delete",
    "export_lines",
    "judge",
    "parse",
    "payloads",
    "pin",
    "q",
    "retire",
    "select_runs",
    "sql_store",
    "stranded",
    "sweep_blobs",
    "sweep_shared_progress",
    "vacuum",
    "write",
]
