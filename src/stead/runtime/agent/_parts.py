"""What every run of an agent takes from it, worked out once per agent instead of once a run.

A run loop needs the agent's tools three ways: the core's view of each (``ToolSpec``, for
``next_step``), the schemas its model requests carry (each a deep copy of a JSON schema),
and their size (the budget's estimate of a prompt). None of it changes while the agent
lives (its ``ToolRegistry`` is immutable), and building it cost a dict, a deep copy per tool
and a ``str`` of every schema at the start of every run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stead.core.decide import ToolSpec
from stead.core.messages import ToolSchema
from stead.runtime.agent._output import output_schemas

if TYPE_CHECKING:
    from stead.runtime.agent._output import OutputSpec
    from stead.tools import ToolRegistry


@dataclass(frozen=True, slots=True)
class AgentParts:
    """An agent's tools as its runs use them. Shared by every run: read, never changed."""

    specs: Mapping[str, ToolSpec]
    """Each tool's ``ToolSpec`` by name (``ToolRegistry.specs``)."""
    schemas: tuple[ToolSchema, ...]
    """The tools as the model sees them, the final-result tool of an ``output_type`` last."""
    schema_chars: int
    """Characters of their names, descriptions and schemas (``Budget``'s prompt estimate)."""
    reconciled: frozenset[str]
    """The tools with a reconcile function: a reply calling none starts no call early."""
    approvals: bool = True
    """Some tool may ask a person to approve a call (``requires_approval`` not False): else
    no call of a reply is asked about, nor given a token."""
    children: bool = False
    """Some tool starts a child run (``stead.agent_tool``): the run's budget then counts
    what its children used."""


def agent_parts(registry: ToolRegistry, output: OutputSpec[Any] | None) -> AgentParts:
    """The parts of an agent with these tools and this output spec."""
    schemas = tuple(registry.schemas()) + output_schemas(output)
    chars = sum(len(t.name) + len(t.description) + len(str(t.parameters)) for t in schemas)
    specs = registry.specs()
    reconciled = frozenset(name for name, spec in specs.items() if spec.has_reconcile)
    approvals = any(t.requires_approval is not False for t in registry)
    return AgentParts(
        specs=specs,
        schemas=schemas,
        schema_chars=chars,
        reconciled=reconciled,
        approvals=approvals,
        children=any(spec.child for spec in specs.values()),
    )
