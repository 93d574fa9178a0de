"""Named crash points: kill this process with SIGKILL at an exact durability boundary.

Tests (ours and users') arm a point, run an agent in a child process, and watch it die right
where a real crash would hurt most; a fresh process then resumes the run. Arming is by
environment variable so it crosses into child processes:

    STEAD_CRASH_AT="after_tool_effect"              first time any tool reaches it
    STEAD_CRASH_AT="after_tool_effect:send_message" only for that tool
    STEAD_CRASH_AT="after_intent#2"                 the second time the point is reached

or programmatically with ``arm(...)``. Unarmed, ``point`` costs one boolean test.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

ENV: Final = "STEAD_CRASH_AT"

POINTS: Final = (
    "mid_model_call",
    "after_intent",
    "after_tool_started",
    "after_dispatch",
    "after_tool_effect",
    "before_result_commit",
    "after_result_commit",
    "after_approval_commit",
    "after_child_created",
    "before_parent_settled",
    "after_cancel_commit",
    "after_message_recorded",
    "before_redispatch",
    "after_redispatch_planned",
    "after_redispatch_accepted",
    "before_import_commit",
    "before_fork_commit",
    "during_prune_batch",
)
"""Every boundary the runtime exposes, in the order a turn reaches them."""

CrashHook: TypeAlias = Callable[[str, str | None], None]
"""What the run loop and the ``Runtime`` call at each point, ``(point, tool or None)``: the
same call in production and under test. The default is ``point`` (a SIGKILL where a test
armed one, else nothing); a test may inject any other callable, e.g. one that records the
points a run reaches."""


@dataclass(slots=True)
class _Arm:
    name: str
    tool: str | None
    hit: int
    seen: int = 0


_arms: list[_Arm] = []
_loaded = False
_active = False


def _parse(spec: str) -> _Arm:
    hit = 1
    if "#" in spec:
        spec, n = spec.split("#", 1)
        hit = int(n)
    name, _, tool = spec.partition(":")
    if name not in POINTS:
        raise ValueError(f"unknown crash point {name!r}; known: {', '.join(POINTS)}")
    return _Arm(name=name, tool=tool or None, hit=hit)


def _load() -> None:
    global _loaded, _active
    _loaded = True
    spec = os.environ.get(ENV, "")
    for part in filter(None, (p.strip() for p in spec.split(","))):
        _arms.append(_parse(part))
    _active = bool(_arms)


def arm(name: str, tool: str | None = None, hit: int = 1) -> None:
    """Arm a crash point in this process."""
    global _active
    if not _loaded:
        _load()
    _arms.append(_parse(f"{name}:{tool}#{hit}" if tool else f"{name}#{hit}"))
    _active = True


def disarm() -> None:
    """Forget every armed point (environment included)."""
    global _active, _loaded
    _arms.clear()
    _loaded, _active = True, False


def armed() -> bool:
    """Whether any crash point is armed in this process (cheap)."""
    if not _loaded:
        _load()
    return _active


def point(name: str, tool: str | None = None) -> None:
    """Die here if this point is armed and this is the hit it waits for."""
    if not _loaded:
        _load()
    if not _active:
        return
    for a in _arms:
        if a.name == name and (a.tool is None or a.tool == tool):
            a.seen += 1
            if a.seen == a.hit:
                os.kill(os.getpid(), signal.SIGKILL)
