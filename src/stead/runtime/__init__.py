"""The imperative shell: run loop, sessions, executors, the ``Runtime`` facade and workers."""

from stead.core.limits import Budget, Limits
from stead.runtime._agent import Agent
from stead.runtime._backoff import Backoff
from stead.runtime._executor import Executor, InProcessExecutor
from stead.runtime._gc import tune_gc  # many runs in flight in one process
from stead.runtime._loop import RunLoop
from stead.runtime._pool import Pool, serve_pool
from stead.runtime._runtime import PendingApproval, Runtime, RunView
from stead.runtime._session import RunSession
from stead.runtime._store_executor import StoreExecutor
from stead.runtime._worker import Worker, serve

__all__ = [
    "Agent",
    "Backoff",
    "Budget",
    "Executor",
    "InProcessExecutor",
    "Limits",
    "PendingApproval",
    "Pool",
    "RunLoop",
    "RunSession",
    "RunView",
    "Runtime",
    "StoreExecutor",
    "Worker",
    "serve",
    "serve_pool",
    "tune_gc",  # many runs in flight in one process
]
