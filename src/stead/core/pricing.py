"""What a model call cost: dollars per million tokens of each kind, and a table of them.

Providers bill four kinds of token at four prices; ``Usage`` counts them separately for this
reason. Cache writes cost more than plain input on Anthropic (1.25x for the default five-minute
cache) and nothing extra on OpenAI; cache reads cost a tenth of input or less.

The built-in table holds list prices in US dollars as the providers publish them; prices
change, and contracts differ, so every use takes a table and ``PriceTable.with_prices``
overrides or extends one. A model the table does not know costs ``None``, not zero: an
unknown price must not look free to a budget.

Model names match exactly, or by the longest table key followed by ``-`` (so the dated
``claude-sonnet-4-5-20250929`` and ``gpt-4.1-2025-04-14`` find their family). The
``anthropic:`` and ``openai:`` prefixes of model strings are ignored.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from stead.core.messages import Usage

_MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens of each kind."""

    input: float
    """Uncached prompt tokens."""
    output: float
    """Generated tokens."""
    cache_write: float
    """Prompt tokens written to the cache."""
    cache_read: float
    """Prompt tokens read from the cache."""

    def cost(self, usage: Usage) -> float:
        """Dollars for ``usage`` at these prices."""
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * self.cache_write
            + usage.cache_read_input_tokens * self.cache_read
        ) / _MILLION


def _anthropic(inp: float, out: float) -> Price:
    # Anthropic: five-minute cache writes at 1.25x input, reads at 0.1x input.
    return Price(input=inp, output=out, cache_write=inp * 1.25, cache_read=inp / 10)


def _openai(inp: float, out: float, cached: float) -> Price:
    # OpenAI: caching is automatic, writes cost plain input, reads are discounted.
    return Price(input=inp, output=out, cache_write=inp, cache_read=cached)


DEFAULT_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # Anthropic
        "claude-opus-5": _anthropic(5.0, 25.0),
        "claude-opus-4-8": _anthropic(5.0, 25.0),
        "claude-opus-4-7": _anthropic(5.0, 25.0),
        "claude-opus-4-6": _anthropic(5.0, 25.0),
        "claude-opus-4-5": _anthropic(5.0, 25.0),
        "claude-opus-4-1": _anthropic(15.0, 75.0),
        "claude-opus-4": _anthropic(15.0, 75.0),
        "claude-sonnet-5": _anthropic(2.0, 10.0),
        "claude-sonnet-4-6": _anthropic(3.0, 15.0),
        "claude-sonnet-4-5": _anthropic(3.0, 15.0),
        "claude-sonnet-4": _anthropic(3.0, 15.0),
        "claude-3-7-sonnet": _anthropic(3.0, 15.0),
        "claude-haiku-4-5": _anthropic(1.0, 5.0),
        "claude-3-5-haiku": _anthropic(0.8, 4.0),
        "claude-3-haiku": Price(input=0.25, output=1.25, cache_write=0.30, cache_read=0.03),
        # OpenAI
        "gpt-5": _openai(1.25, 10.0, 0.125),
        "gpt-5-mini": _openai(0.25, 2.0, 0.025),
        "gpt-5-nano": _openai(0.05, 0.40, 0.005),
        "gpt-4.1": _openai(2.0, 8.0, 0.50),
        "gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
        "gpt-4.1-nano": _openai(0.10, 0.40, 0.025),
        "gpt-4o": _openai(2.50, 10.0, 1.25),
        "gpt-4o-mini": _openai(0.15, 0.60, 0.075),
        "o3": _openai(2.0, 8.0, 0.50),
        "o3-mini": _openai(1.10, 4.40, 0.55),
        "o4-mini": _openai(1.10, 4.40, 0.275),
        # stead.testing.ScriptedModel: free, so dollar budgets work in tests and demos
        "scripted": Price(input=0.0, output=0.0, cache_write=0.0, cache_read=0.0),
    }
)
"""List prices, USD per million tokens. Check them against your provider's page."""


class PriceTable:
    """Model name -> ``Price``, with family matching; immutable, extend with ``with_prices``.

    ``PriceTable({...})`` is the defaults with those entries added or replaced;
    ``defaults=False`` starts from nothing.
    """

    __slots__ = ("_found", "_prices")

    def __init__(self, prices: Mapping[str, Price] | None = None, *, defaults: bool = True) -> None:
        self._prices = {**(DEFAULT_PRICES if defaults else {}), **(prices or {})}
        self._found: dict[str, Price | None] = {}
        """``lookup``'s answers by model name: the table never changes, and a run's view
        prices every turn (a family match scans every key)."""

    def with_prices(self, prices: Mapping[str, Price]) -> PriceTable:
        """A new table: this one, with ``prices`` added or replacing entries of the same name."""
        return PriceTable({**self._prices, **prices}, defaults=False)

    def lookup(self, model: str) -> Price | None:
        """The price of ``model``: exact name, else the longest family key; None if unknown."""
        if model in self._found:
            return self._found[model]
        if len(self._found) >= 1024:  # bounded: model names come from providers' replies
            self._found.clear()
        price = self._found[model] = self._match(model)
        return price

    def _match(self, model: str) -> Price | None:
        name = model
        for prefix in ("anthropic:", "openai:"):
            if name.startswith(prefix):
                name = name[len(prefix) :]
        exact = self._prices.get(name)
        if exact is not None:
            return exact
        best = ""
        for key in self._prices:
            if name.startswith(key + "-") and len(key) > len(best):
                best = key
        return self._prices[best] if best else None

    def get(self, model: str) -> Price | None:
        """Alias of ``lookup``."""
        return self.lookup(model)

    def cost(self, usage: Usage, model: str) -> float | None:
        """Dollars for ``usage`` on ``model``; None when the table has no price for it."""
        price = self.lookup(model)
        return None if price is None else price.cost(usage)

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.lookup(model) is not None


PRICES = PriceTable()
"""The default table."""


def cost(usage: Usage, model: str, table: PriceTable = PRICES) -> float | None:
    """Dollars for ``usage`` on ``model`` from ``table``; None for an unknown model."""
    return table.cost(usage, model)
