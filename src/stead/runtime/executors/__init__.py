"""Where effects are performed: the ``Executor`` port, the in-process executor, the executor
on the store's execution ledger (``StoreExecutor``), and progress streamed from afar.

Imports nothing else of ``stead.runtime``."""

from stead.runtime.executors._executor import Executor, InProcessExecutor, Leased, tool_context
from stead.runtime.executors._far_progress import Forwarder, far_sink
from stead.runtime.executors._shared_progress import ProgressShare, share_key
from stead.runtime.executors._store_executor import (
    StoreExecutor,
    outcome_from_json,
    outcome_to_json,
    read_outcome,
    routed,
)

__all__ = [
    "Executor",
    "Forwarder",
    "InProcessExecutor",
    "Leased",
    "ProgressShare",
    "StoreExecutor",
    "far_sink",
    "outcome_from_json",
    "outcome_to_json",
    "read_outcome",
    "routed",
    "share_key",
    "tool_context",
]
