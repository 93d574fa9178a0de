"""The price table: four token kinds at four prices, family matching, overrides, unknowns."""

from __future__ import annotations

import pytest

from stead.core.messages import Usage
from stead.core.pricing import PRICES, Price, PriceTable, cost

USAGE = Usage(
    input_tokens=1_000_000,
    output_tokens=1_000_000,
    cache_creation_input_tokens=1_000_000,
    cache_read_input_tokens=1_000_000,
)


def test_each_kind_is_priced_separately() -> None:
    price = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
    assert price.cost(Usage(input_tokens=2_000)) == pytest.approx(0.006)
    assert price.cost(Usage(output_tokens=2_000)) == pytest.approx(0.03)
    assert price.cost(Usage(cache_creation_input_tokens=2_000)) == pytest.approx(0.0075)
    assert price.cost(Usage(cache_read_input_tokens=2_000)) == pytest.approx(0.0006)


@pytest.mark.parametrize(
    ("model", "dollars"),
    [
        ("claude-sonnet-4-6", 3 + 15 + 3.75 + 0.30),
        ("anthropic:claude-haiku-4-5-20251001", 1 + 5 + 1.25 + 0.10),
        ("claude-opus-4-1-20250805", 15 + 75 + 18.75 + 1.50),
        ("gpt-4.1-2025-04-14", 2 + 8 + 2 + 0.50),
        ("openai:gpt-4.1-mini", 0.40 + 1.60 + 0.40 + 0.10),  # not gpt-4.1's price
        ("gpt-4o-mini-2024-07-18", 0.15 + 0.60 + 0.15 + 0.075),
    ],
)
def test_dated_and_prefixed_names_find_their_family(model: str, dollars: float) -> None:
    assert cost(USAGE, model) == pytest.approx(dollars)


def test_an_unknown_model_costs_none_not_zero() -> None:
    assert cost(USAGE, "qwen3") is None
    assert "qwen3" not in PRICES
    assert "gpt-4.10" not in PRICES  # a family match needs the "-" boundary


def test_overrides_make_a_new_table() -> None:
    mine = PRICES.with_prices(
        {"qwen3": Price(input=0.1, output=0.2, cache_write=0.1, cache_read=0.0)}
    )
    assert mine.cost(Usage(input_tokens=10_000_000), "qwen3") == pytest.approx(1.0)
    assert cost(USAGE, "qwen3") is None  # the default table is untouched
    cheaper = PriceTable({"gpt-4.1": Price(input=1, output=1, cache_write=1, cache_read=1)})
    assert cheaper.cost(USAGE, "gpt-4.1-2025-04-14") == pytest.approx(4.0)
