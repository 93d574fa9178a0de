"""The imperative shell: run loop, sessions, executors, and the ``Runtime`` facade."""

from stead.core.limits import Budget, Limits
from stead.runtime._agent import Agent
from stead.runtime._executor import Executor, InProcessExecutor
from stead.runtime._loop import Backoff, RunLoop
from stead.runtime._runtime import PendingApproval, Runtime, RunView
from stead.runtime._session import RunSession

__all__ = [
    "Agent",
    "Backoff",
    "Budget",
    "Executor",
    "InProcessExecutor",
    "Limits",
    "PendingApproval",
    "RunLoop",
    "RunSession",
    "RunView",
    "Runtime",
]
