"""The imperative shell: run loop, sessions, executors, the ``Runtime`` facade and workers."""

from stead.core.limits import Budget, Limits
from stead.runtime.agent._agent import Agent
from stead.runtime.loop._backoff import Backoff
from stead.runtime.executors._executor import Executor, InProcessExecutor
from stead.runtime.processes._gc import tune_gc  # many runs in flight (issue 15)
from stead.runtime.loop._loop import RunLoop
from stead.runtime.processes._pool import Pool, serve_pool
from stead.runtime._runtime import PendingApproval, Runtime, RunView
from stead.runtime.loop._owned import RunSession
from stead.runtime.executors._store_executor import StoreExecutor
from stead.runtime.processes._worker import Worker, serve

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
    "tune_gc",  # many runs in flight (issue 15)
]
