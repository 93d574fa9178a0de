"""What a running tool may know about the call it serves.

A handler (or a reconcile function) asks for it by annotating one parameter with
``ToolContext``; that parameter is left out of the model-facing schema and filled in by the
runtime. It is how an idempotent write finds its idempotency key, how a long handler
notices that its run was cancelled, and how a tool reaches the worker's live objects (a
database pool, an HTTP client): ``ctx.deps``, typed by annotating ``ToolContext[MyDeps]``.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic

from typing_extensions import TypeVar

from stead._lease import HeldLease
from stead._signal import AbortSignal
from stead.core.codegen import fast_init
from stead.errors import UserError
from stead.tools._run_child import CHILD_PORT
from stead.tools._subprocess import Child, run_subprocess, run_subprocess_sync

DepsT = TypeVar("DepsT", default=Any)
"""The type of ``ctx.deps``: ``ToolContext[MyDeps]``; a bare ``ToolContext`` reads it as Any."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext(Generic[DepsT]):
    """The identity of one attempt of one tool call, its cancellation signal, and the
    worker's dependencies."""

    run_id: str
    tool_call_id: str
    """The model's id for the call (``toolu_...``, ``call_...``)."""
    turn_index: int
    """The turn whose reply asked for the call, counted from 0."""
    idempotency_key: str
    """``sha256(run_id + tool_call_id)`` in hex: the same on every attempt, so pass it to the
    service you write to and let it drop the duplicate a retried call would otherwise make."""
    attempt: int
    """1 on the first execution, more when the call is run again after a crash."""
    tool_name: str
    signal: AbortSignal
    """Set when the run is cancelled, or passes its deadline, or when this attempt passes
    the tool's ``timeout``. Async handlers can await ``signal.wait()``; sync ones (run in a
    worker thread, which cannot be interrupted) should poll ``aborted``."""

    cancel_grace: float = 5.0
    """Seconds a cancelled tool's subprocesses get between SIGTERM and SIGKILL."""
    deps: DepsT = None  # type: ignore[assignment]
    """``Runtime(deps=...)`` of the process running the call: live objects, never recorded,
    so a run resumed elsewhere gets that process's own (None when none were given)."""
    lease: HeldLease | None = None
    """The lease under which the call runs (None where there is none: a reconcile asked
    outside a drive, a test's context)."""

    @property
    def aborted(self) -> bool:
        """True once the run was cancelled, the attempt timed out, or the lease this call
        runs under can no longer be trusted (its local deadline passed: this process was
        paused or cut off from the store, and another may have taken the run over): stop
        and raise or return. Read from the clock, not from a timer, so it is True at once
        in a process that just woke from a pause. Check it right before an effect."""
        lease = self.lease
        return self.signal.aborted or (lease is not None and lease.lapsed())

    @property
    def fencing_token(self) -> int:
        """A number that grows each time the run (or, in an executor pool, the call's key)
        changes hands, and stays the same for one holder. Send it with the effect and let
        the service refuse a token lower than the highest it has seen for the resource:
        the one protection from a pause between the check of ``aborted`` and the effect
        (docs/recovery.md). 0 where the call runs under no lease."""
        lease = self.lease
        return 0 if lease is None else lease.token

    async def lease_lost(self) -> str:
        """Wait until the lease this call runs under is lost (its local deadline passed, or
        another holder took it); returns why. Waits forever where there is no lease."""
        lease = self.lease
        if lease is None:
            await asyncio.Event().wait()
        assert lease is not None
        return await lease.wait_lost()

    async def run_subprocess(
        self,
        args: Sequence[str],
        *,
        input: bytes | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a child process in its own process group. If the run is cancelled (or the
        attempt times out), the group gets SIGTERM, then SIGKILL after ``cancel_grace``, and
        this raises ``Aborted``."""
        child = Child(args=args, input=input, cwd=cwd, env=env)
        return await run_subprocess(child, self.signal, self.cancel_grace)

    async def run_child(self, agent: Any, input: str) -> Any:
        """Hand ``input`` to ``agent`` (a ``stead.Agent``) as a durable child run of this
        call, and return its output: its structured output (an instance of its
        ``output_type``) when it has one, else its text.

        The child is created once per call, also across crashes: its id is derived from the
        call and from its place among the children this handler starts (the first, the
        second, ...). The first time, the child does not exist: this starts it and stops
        the handler (``ChildPending``; let it through), the run rests while the child works,
        and the child's end runs the handler again from its top, where this returns the
        child's result. So the code before a ``run_child`` runs again on every wake: keep
        it free of effects that must not repeat, or make them idempotent with
        ``idempotency_key``, and start the same children in the same order each time.

        A child that failed, was cancelled or timed out raises ``ChildRunFailed`` (uncaught,
        it is the call's error result, which the model reads). The child is recorded with
        this tool's effect class and held to the tree's budget and ``Limits.max_depth``.
        Only in an async handler run by the run's own worker (not an executor pool)."""
        port = CHILD_PORT.get()
        if port is None or port.run_id != self.run_id:
            raise UserError(
                f"ToolContext.run_child: tool {self.tool_name!r} does not run in the worker "
                "that drives its run (an executor pool, or outside a drive); a child run "
                "can only be started there"
            )
        return await port.run_child(self, agent, input)

    def run_subprocess_sync(
        self,
        args: Sequence[str],
        *,
        input: bytes | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """``run_subprocess`` for sync handlers (they run in a worker thread)."""
        child = Child(args=args, input=input, cwd=cwd, env=env)
        return run_subprocess_sync(child, self.signal, self.cancel_grace)
