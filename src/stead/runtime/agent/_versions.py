"""An agent's fingerprint: what it is a digest of (``stead.core.versions`` digests it)."""

from __future__ import annotations

from typing import Any

from stead.core.canonical import JSON
from stead.core.versions import fingerprint


def describe(agent: Any) -> JSON:
    """What an agent's fingerprint is a digest of: its name, its tools as the model sees them
    (names and argument schemas; the typed-output tool among them) with their effect classes,
    its instructions, its model and its version label."""
    specs = agent._parts.specs
    tools: list[Any] = [
        {
            "name": t.name,
            "parameters": t.parameters,
            "effect_class": specs[t.name].effect_class if t.name in specs else None,
        }
        for t in sorted(agent._parts.schemas, key=lambda t: t.name)
    ]
    return {
        "agent": agent.name,
        "tools": tools,
        "system": agent.system,
        "model": agent.model.model_name,
        "version": agent.version or "",
    }


def fingerprint_of(agent: Any) -> str:
    """The agent's fingerprint (``stead.core.versions.fingerprint`` of ``describe``)."""
    return fingerprint(describe(agent))
