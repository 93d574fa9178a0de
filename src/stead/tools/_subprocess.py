"""Child processes a tool can start and that a cancel can stop, grandchildren included.

The child runs in its own session, hence its own process group; on abort the whole group gets
SIGTERM and, after a grace period, SIGKILL. Killing only the direct child would leave
``sh -c 'a | b'`` pipelines and daemons running after the run was cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as _signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stead._signal import AbortSignal
from stead.errors import Aborted


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Child:
    """One child process to run, as a tool asked for it (``ToolContext.run_subprocess``)."""

    args: Sequence[str]
    input: bytes | None = None
    cwd: str | None = None
    env: Mapping[str, str] | None = None

    def options(self) -> dict[str, Any]:
        """How both the async and the sync runner start it: pipes, and its own session."""
        return {
            "stdin": subprocess.PIPE if self.input is not None else subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.PIPE,
            "cwd": self.cwd,
            "env": dict(self.env) if self.env is not None else None,
            "start_new_session": True,
        }

    def completed(self, code: int, out: bytes, err: bytes) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(list(self.args), code, out, err)


async def run_subprocess(
    child: Child, abort: AbortSignal, grace: float
) -> subprocess.CompletedProcess[bytes]:
    """Run ``child`` to completion unless the run is cancelled (then raise ``Aborted``)."""
    proc = await asyncio.create_subprocess_exec(*child.args, **child.options())
    work = asyncio.ensure_future(proc.communicate(child.input))
    stop = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            out, err = work.result()
            return child.completed(proc.returncode or 0, out, err)
        await _terminate(proc.pid, work, grace)
        raise Aborted(abort.reason)
    except asyncio.CancelledError:
        await _terminate(proc.pid, work, 0)
        raise
    finally:
        stop.cancel()


async def _terminate(pgid: int, work: asyncio.Future[tuple[bytes, bytes]], grace: float) -> None:
    _kill_group(pgid, _signal.SIGTERM)
    deadline = asyncio.get_running_loop().time() + grace
    while _group_alive(pgid) and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.02)  # no event tells us a process group is gone; poll
    _kill_group(pgid, _signal.SIGKILL)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(asyncio.shield(work), timeout=max(grace, 1.0))


def run_subprocess_sync(
    child: Child, abort: AbortSignal, grace: float
) -> subprocess.CompletedProcess[bytes]:
    """The same for a sync handler (which runs in a worker thread)."""
    proc = subprocess.Popen(list(child.args), **child.options())
    if child.input is not None and proc.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(child.input)
            proc.stdin.close()
    while proc.poll() is None:
        if abort.wait_sync(0.05):
            _kill_group(proc.pid, _signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
            _kill_group(proc.pid, _signal.SIGKILL)
            proc.wait()
            raise Aborted(abort.reason)
    out, err = proc.communicate()
    return child.completed(proc.returncode, out, err)
