"""Agent definitions: a name, a model, tools, a system prompt and the limits that bound it.

A run records only the agent's *name*; any process given an agent of that name can continue
the run. Keep an agent's tools and prompt stable across deploys, or give it a new name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from stead.errors import UserError
from stead.providers import ModelProvider
from stead.tools import Tool, ToolRegistry


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Hard ceilings that stop a run even when the model would not."""

    max_turns: int = 50
    """Model turns per run."""
    max_tool_calls_per_turn: int = 64
    """Tool calls honoured from one reply."""
    max_model_attempts: int = 4
    """Attempts per model call when failures are retryable."""

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.max_tool_calls_per_turn < 1 or self.max_model_attempts < 1:
            raise UserError("Limits values must be at least 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Token and cost ceilings for a run (enforced before a turn would breach them)."""

    max_input_tokens: int | None = None
    """Prompt tokens (all kinds)."""
    max_output_tokens: int | None = None
    """Generated tokens."""
    max_total_tokens: int | None = None
    """Everything."""
    max_usd: float | None = None
    """Dollars, from the price table."""


class Agent:
    """What drives a run: model, tools, system prompt, limits."""

    def __init__(
        self,
        name: str,
        model: ModelProvider,
        tools: Iterable[Tool[..., Any]] = (),
        system: str = "",
        *,
        limits: Limits | None = None,
        budget: Budget | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise UserError("an Agent needs a non-empty name: runs find their agent by it")
        self.name = name
        self.model = model
        self.registry = ToolRegistry(tools)
        self.system = system
        self.limits = limits or Limits()
        self.budget = budget or Budget()
        self.max_output_tokens = max_output_tokens

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={self.registry.names()})"
