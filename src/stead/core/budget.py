"""Budget decisions: would the next model call breach the run's budget? Decided before spending.

The next call's cost is estimated from its prompt (counted by the provider, or ~4 characters a
token when it cannot count) plus the most it may generate (the request's max output tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stead.core.limits import Budget
from stead.core.messages import Usage
from stead.core.pricing import Price

CHARS_PER_TOKEN = 4
"""The estimate used when a prompt cannot be counted exactly."""


def estimate_tokens(chars: int) -> int:
    """Tokens for ``chars`` characters of prompt, rounded up."""
    return -(-chars // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True, kw_only=True)
class Breach:
    """Why the next turn may not start, with the figures a person needs."""

    message: str
    """One line for people."""
    details: dict[str, Any]
    """spent, next-turn estimate and the budget, as JSON."""


def budget_breach(
    spent: Usage,
    next_input_tokens: int,
    next_output_tokens: int,
    budget: Budget,
    price: Price | None,
) -> Breach | None:
    """None when the next call fits the budget; otherwise what it would breach.

    ``price`` may be None only when the budget sets no dollar ceiling.
    """
    if budget.unlimited:
        return None
    nxt = Usage(input_tokens=next_input_tokens, output_tokens=next_output_tokens)
    after = spent + nxt
    spent_in = (
        spent.input_tokens + spent.cache_creation_input_tokens + spent.cache_read_input_tokens
    )
    after_in = spent_in + next_input_tokens
    reasons: list[str] = []
    if budget.max_input_tokens is not None and after_in > budget.max_input_tokens:
        reasons.append(f"input tokens {after_in} > {budget.max_input_tokens}")
    if budget.max_output_tokens is not None and after.output_tokens > budget.max_output_tokens:
        reasons.append(f"output tokens {after.output_tokens} > {budget.max_output_tokens}")
    if budget.max_total_tokens is not None and after.total_tokens > budget.max_total_tokens:
        reasons.append(f"total tokens {after.total_tokens} > {budget.max_total_tokens}")
    spent_usd = price.cost(spent) if price is not None else None
    next_usd = price.cost(nxt) if price is not None else None
    if budget.max_usd is not None:
        if spent_usd is None or next_usd is None:
            raise ValueError("a dollar budget needs a price for the model")
        if spent_usd + next_usd > budget.max_usd:
            reasons.append(f"cost ${spent_usd + next_usd:.4f} > ${budget.max_usd:.4f}")
    if not reasons:
        return None
    details = {
        "spent": {**spent.to_json(), "usd": spent_usd},
        "next_turn_estimate": {
            "input_tokens": next_input_tokens,
            "output_tokens": next_output_tokens,
            "usd": next_usd,
        },
        "budget": budget.to_json(),
    }
    usd = f", ${spent_usd:.4f}" if spent_usd is not None else ""
    nusd = f", ${next_usd:.4f}" if next_usd is not None else ""
    message = (
        f"the next turn would breach the budget ({'; '.join(reasons)}). Spent "
        f"{spent_in} in / {spent.output_tokens} out tokens{usd}; the next turn would cost about "
        f"{next_input_tokens} in / up to {next_output_tokens} out tokens{nusd}."
    )
    return Breach(message=message, details=details)
