"""Agents of other frameworks where a ``stead.Agent`` is taken.

An integration (``stead.pydantic_ai``) registers, for its framework's agent class, a function
that returns the ``stead.Agent`` standing for such an agent. ``Runtime(agents=...)``,
``Runtime.start``, ``Runtime.send`` and the CLI's ``module:agent`` pass what they are given
through ``as_agent``, so a foreign agent is accepted wherever a ``stead.Agent`` is. The
function is asked once per object: the same foreign agent always stands as the same
``stead.Agent`` (the runtime tells agents apart by identity).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stead.runtime.agent._agent import Agent

_ADAPTERS: list[tuple[type, Callable[[Any], Agent]]] = []
_MADE: dict[int, tuple[Any, Agent]] = {}
"""By ``id``, holding the foreign agent too (so its id is never reused): agents live as long
as the process, and a framework's agent need not be hashable."""


def register_adapter(cls: type, adapt: Callable[[Any], Agent]) -> None:
    """Make instances of ``cls`` usable as agents, through ``adapt`` (called once per object)."""
    for i, (known, _) in enumerate(_ADAPTERS):
        if known is cls:
            _ADAPTERS[i] = (cls, adapt)
            return
    _ADAPTERS.append((cls, adapt))


def as_agent(obj: Any) -> Any:
    """``obj`` itself when it is a ``stead.Agent`` or no integration knows its class, else the
    ``stead.Agent`` that stands for it (made on first use, then the same one)."""
    if isinstance(obj, Agent) or not _ADAPTERS:
        return obj
    for cls, adapt in _ADAPTERS:
        if isinstance(obj, cls):
            made = _MADE.get(id(obj))
            if made is not None:
                return made[1]
            agent = adapt(obj)
            _MADE[id(obj)] = (obj, agent)
            return agent
    return obj
