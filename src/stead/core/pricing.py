"""Prices per model, in dollars per million tokens of each kind.

Cache writes and cache reads are priced apart from plain input, as providers bill them. The
table is data: ``PriceTable({...})`` overrides or extends the defaults, and a dated model name
(``claude-sonnet-4-5-20250929``) finds its family's entry by longest prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from stead.core.messages import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens."""

    input: float
    """Uncached prompt tokens."""
    output: float
    """Generated tokens."""
    cache_write: float
    """Prompt tokens written to the cache."""
    cache_read: float
    """Prompt tokens read from the cache."""

    def cost(self, usage: Usage) -> float:
        """Dollars for ``usage``."""
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * self.cache_write
            + usage.cache_read_input_tokens * self.cache_read
        ) / 1_000_000


DEFAULT_PRICES: Final[Mapping[str, Price]] = MappingProxyType(
    {
        # Anthropic (cache writes at 1.25x input, reads at 0.1x).
        "claude-opus-4": Price(15.0, 75.0, 18.75, 1.50),
        "claude-sonnet-4": Price(3.0, 15.0, 3.75, 0.30),
        "claude-3-7-sonnet": Price(3.0, 15.0, 3.75, 0.30),
        "claude-3-5-haiku": Price(0.80, 4.0, 1.0, 0.08),
        "claude-haiku-4": Price(1.0, 5.0, 1.25, 0.10),
        # OpenAI (no cache-write surcharge; cached input discounted).
        "gpt-4.1": Price(2.0, 8.0, 2.0, 0.50),
        "gpt-4.1-mini": Price(0.40, 1.60, 0.40, 0.10),
        "gpt-4.1-nano": Price(0.10, 0.40, 0.10, 0.025),
        "gpt-4o": Price(2.50, 10.0, 2.50, 1.25),
        "gpt-4o-mini": Price(0.15, 0.60, 0.15, 0.075),
        "o3": Price(2.0, 8.0, 2.0, 0.50),
        "o4-mini": Price(1.10, 4.40, 1.10, 0.275),
        # Test and local models cost nothing.
        "scripted": Price(0.0, 0.0, 0.0, 0.0),
    }
)


class PriceTable:
    """Model name -> Price, with user overrides on top of the defaults."""

    def __init__(
        self, overrides: Mapping[str, Price] | None = None, *, defaults: bool = True
    ) -> None:
        self._prices: dict[str, Price] = dict(DEFAULT_PRICES) if defaults else {}
        self._prices.update(overrides or {})

    def get(self, model: str) -> Price | None:
        """The entry for ``model``: exact, else the longest matching prefix."""
        name = model.split(":")[-1] if ":" in model and not model.startswith("http") else model
        if name in self._prices:
            return self._prices[name]
        best = max((k for k in self._prices if name.startswith(k)), key=len, default=None)
        return self._prices[best] if best is not None else None

    def cost(self, model: str, usage: Usage) -> float | None:
        """Dollars for ``usage`` on ``model``; None when the model has no price."""
        price = self.get(model)
        return None if price is None else price.cost(usage)
