"""The execution ledger: one short event log per effect key, on a SQL store, written once for
both dialects. A store hands it its dialect's half (``open_ledger``); this package imports no
dialect.

``ledger_for(store)`` opens it; beside it: where each key ran (``placements``), a queue's
fleet-wide limits, progress from afar, the streamed text shared for watchers, and the holder's
giving up of keys it lost track of.
"""

from stead.store.ledger._ledger import (
    OPEN,
    READ,
    SETTLE_MARK,
    Change,
    Claimed,
    KeyRow,
    Ledger,
    WithLedger,
    event_data,
    event_of,
    key_row,
    ledger_for,
)
from stead.store.ledger._limits import pause as pause_queue
from stead.store.ledger._limits import set_limit as set_queue_limit
from stead.store.ledger._placement import Placement, placements
from stead.store.ledger._progress import forget as forget_progress
from stead.store.ledger._progress import frames as progress_frames
from stead.store.ledger._progress import publish as publish_progress
from stead.store.ledger._shared import open_stream as open_shared_progress
from stead.store.ledger._shared import stream_frames as shared_progress_frames
from stead.store.ledger._strays import give_up as give_up_strays

__all__ = [
    "OPEN",
    "READ",
    "SETTLE_MARK",
    "Change",
    "Claimed",
    "KeyRow",
    "Ledger",
    "Placement",
    "WithLedger",
    "event_data",
    "event_of",
    "forget_progress",
    "give_up_strays",
    "key_row",
    "ledger_for",
    "open_shared_progress",
    "pause_queue",
    "placements",
    "progress_frames",
    "publish_progress",
    "set_queue_limit",
    "shared_progress_frames",
]
