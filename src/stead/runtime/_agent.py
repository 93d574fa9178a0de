"""Agent definitions: a name, a model, tools, a system prompt and the limits that bound it.

A run records only the agent's *name*; any process given an agent of that name can continue
the run. Keep an agent's tools and prompt stable across deploys, or give it a new name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stead.core.limits import Budget, Limits
from stead.core.pricing import PriceTable
from stead.errors import UserError
from stead.providers import ModelProvider
from stead.tools import Tool, ToolRegistry


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
        prices: PriceTable | None = None,
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
        self.prices = prices or PriceTable()
        if self.budget.max_usd is not None and self.prices.get(model.model_name) is None:
            raise UserError(
                f"a dollar budget needs a price for model {model.model_name!r}; pass "
                "prices=PriceTable({name: Price(...)}) to the Agent"
            )

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={self.registry.names()})"
