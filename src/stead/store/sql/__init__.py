"""What both SQL dialects share: the ``Store`` contract and its row codec, the shared SQL and
logic (``SQLStore``), group commit, waiting on notices and polls, and the migrations.

Imports no dialect: ``stead.store.sqlite`` and ``stead.store.postgres`` complete ``SQLStore``.
"""

from stead.store.sql._base import (
    CLAIMABLE,
    PACK_AT,
    Claim,
    Duplicate,
    Loaded,
    RunRecord,
    Store,
    StoredEvent,
    append_refusal,
    created_row,
    decode_events,
    decode_row,
    dumps,
    event_row,
    is_transient,
    known_key,
    pack_data,
    unpack_data,
)
from stead.store.sql._chat import ConversationEntry, ConversationStore
from stead.store.sql._group import GroupCommit
from stead.store.sql._migrations import migrations, statements
from stead.store.sql._search import RunQuery, RunSearch
from stead.store.sql._store import (
    CLAIMABLE_SQL,
    RUN_COLUMNS,
    Append,
    BeforeCommit,
    Row,
    Session,
    SQLStore,
    crash_before_result,
    pack,
    record,
    result_recorded,
    snapshot_of,
    unarmed,
)
from stead.store.sql._watch import Watcher, stop_task
from stead.store.sql._watch import _until_set as until_set

__all__ = [
    "CLAIMABLE",
    "CLAIMABLE_SQL",
    "PACK_AT",
    "RUN_COLUMNS",
    "Append",
    "BeforeCommit",
    "Claim",
    "ConversationEntry",
    "ConversationStore",
    "Duplicate",
    "GroupCommit",
    "Loaded",
    "Row",
    "RunQuery",
    "RunRecord",
    "RunSearch",
    "SQLStore",
    "Session",
    "Store",
    "StoredEvent",
    "Watcher",
    "append_refusal",
    "crash_before_result",
    "created_row",
    "decode_events",
    "decode_row",
    "dumps",
    "event_row",
    "is_transient",
    "known_key",
    "migrations",
    "pack",
    "pack_data",
    "record",
    "result_recorded",
    "snapshot_of",
    "statements",
    "stop_task",
    "unarmed",
    "unpack_data",
    "until_set",
]
