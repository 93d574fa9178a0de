"""The imperative shell: the ``Runtime`` facade over the run loop, executors and workers.

Sub-packages, each importing only the ones below it: ``agent`` (what a program defines and
sees), ``executors`` (where effects are performed), ``loop`` (driving one run), the facade
modules here (``Runtime``, conversations, steering, following), and ``processes`` (worker,
executor pool)."""

import warnings
from typing import Any

from stead.core.limits import Budget, Limits
from stead.runtime._children import RunTree
from stead.runtime._find import resume_refusal
from stead.runtime._lifecycle import Pruned, Pruner, copy_store
from stead.runtime._runtime import Runtime
from stead.runtime._steps import CallStep, RunSteps, TurnStep
from stead.runtime.agent import (
    Agent,
    PendingApproval,
    RunView,
    agent_tool,
    as_agent,
    register_adapter,
    resolve_run_id,
)
from stead.runtime.executors import Executor, InProcessExecutor, StoreExecutor
from stead.runtime.loop import Backoff, DriveStart, DriveWatch, Observer, OwnedRun, RunLoop
from stead.runtime.processes import Pool, Worker, serve_pool, serve_worker, tune_gc

__all__ = [
    "Agent",
    "Backoff",
    "Budget",
    "CallStep",
    "DriveStart",
    "DriveWatch",
    "Executor",
    "InProcessExecutor",
    "Limits",
    "Observer",
    "OwnedRun",
    "PendingApproval",
    "Pool",
    "Pruned",
    "Pruner",
    "RunLoop",
    "RunSteps",
    "RunTree",
    "RunView",
    "Runtime",
    "StoreExecutor",
    "TurnStep",
    "Worker",
    "agent_tool",
    "as_agent",
    "copy_store",
    "register_adapter",
    "resolve_run_id",
    "resume_refusal",
    "serve_pool",
    "serve_worker",
    "tune_gc",  # for a process with many runs in flight
]

# Old names kept for programs written against them; each warns once it is used.
_DEPRECATED = {"RunSession": ("OwnedRun", OwnedRun), "serve": ("serve_worker", serve_worker)}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new, value = _DEPRECATED[name]
        warnings.warn(
            f"stead.runtime.{name} is deprecated; use stead.runtime.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return value
    raise AttributeError(f"module 'stead.runtime' has no attribute {name!r}")
