"""Dependencies for tools: ``Agent(deps_type=...)``, ``Runtime(deps=...)``, ``ctx.deps``.

Deps are the live objects of the process that runs a tool (a database pool, an HTTP client,
a config object). They are never recorded: a run resumed by another process gets *that*
process's deps, which is the point (a connection pool does not survive a crash, and a log
must not hold one). Both ends are checked when they meet: a tool that reads
``ToolContext[Db]`` in an agent whose ``deps_type`` is not a ``Db``, or a ``Runtime`` whose
``deps`` are not the agent's ``deps_type``, is a ``UserError`` at construction, not an
``AttributeError`` in a tool at three in the morning. A ``Runtime`` given no deps at all
still takes such an agent: reading its runs, answering their questions and recording
decisions run no tool (schemas come from the agent), so a dashboard or a decision from the
command line needs no database pool; driving one of its runs is refused before anything is
claimed or written, saying to pass the deps.
"""

from __future__ import annotations

import typing
from typing import Any, Protocol

from stead.errors import UserError
from stead.tools import ToolContext, ToolRegistry


class DepsOwner(Protocol):
    """What the check needs of an ``Agent``; a protocol so ``_agent`` may import this module."""

    @property
    def name(self) -> str: ...

    @property
    def deps_type(self) -> type[Any] | None: ...


def _wanted(fn: Any) -> list[Any]:
    """The ``X`` of each ``ToolContext[X]`` parameter of ``fn`` (none for a bare one)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # the tool decorator resolved them already; be safe, never raise here
        return []
    return [
        typing.get_args(h)[0]
        for h in hints.values()
        if typing.get_origin(h) is ToolContext and typing.get_args(h)
    ]


def check_deps_type(agent: str, deps_type: object, registry: ToolRegistry) -> type[Any] | None:
    """``deps_type`` itself, checked against what the agent's tools read as ``ctx.deps``."""
    if deps_type is not None and not isinstance(deps_type, type):
        raise UserError(
            f"Agent {agent!r}: deps_type takes a class (the type of Runtime(deps=...)), "
            f"not {type(deps_type).__name__} {deps_type!r:.40}"
        )
    for tool in registry:
        fns = [tool.fn, *([tool.reconcile] if tool.reconcile is not None else [])]
        for want in (w for fn in fns for w in _wanted(fn)):
            if want is Any or not isinstance(want, type):
                continue
            if deps_type is None:
                raise UserError(
                    f"Agent {agent!r}: tool {tool.name!r} reads ctx.deps as "
                    f"{want.__name__}, but the agent has no deps_type; pass "
                    f"deps_type={want.__name__} (and Runtime(deps=...))"
                )
            if not issubclass(deps_type, want):
                raise UserError(
                    f"Agent {agent!r}: tool {tool.name!r} reads ctx.deps as "
                    f"{want.__name__}, but the agent's deps_type is {deps_type.__name__}; "
                    "make them agree"
                )
    return deps_type


def check_deps(agent: DepsOwner, deps: object) -> None:
    """A ``UserError`` when this Runtime's ``deps`` are not what ``agent`` needs."""
    want = agent.deps_type
    if want is None:
        return
    if deps is None:
        raise UserError(
            f"agent {agent.name!r} needs deps of type {want.__name__} for its tools; pass "
            f"Runtime(deps=...) (a {want.__name__}), or to a stead command --deps "
            "module:factory (a function that makes one)"
        )
    if not isinstance(deps, want):
        raise UserError(
            f"agent {agent.name!r} needs deps of type {want.__name__}, but this Runtime's "
            f"deps are a {type(deps).__name__}; pass Runtime(deps=<a {want.__name__}>)"
        )
