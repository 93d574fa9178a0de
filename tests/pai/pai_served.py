"""Pydantic AI agents for ``stead serve`` and ``stead worker`` children (``--agents
pai_served:agents``), on Pydantic AI's own ``AnthropicModel`` pointed at the test's wire
server (``PAI_BASE_URL``).

* ``pai_refunds``: refunds an order; every refund waits for a person's approval.
* ``pai_streamer``: answers in streamed text (the test stalls the stream halfway).
"""

from __future__ import annotations

import os

from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider

from stead.pydantic_ai import SteadDurability


def _model() -> AnthropicModel:
    url = os.environ.get("PAI_BASE_URL", "http://127.0.0.1:9")
    return AnthropicModel(
        "claude-sonnet-4-6", provider=AnthropicProvider(api_key="sk-ant-test", base_url=url)
    )


refunds: Agent[None, str] = Agent(_model(), name="pai_refunds", capabilities=[SteadDurability()])


@refunds.tool_plain(requires_approval=True, metadata={"stead": {"effect": "non_idempotent"}})
def refund(order_id: int, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents} on order {order_id}"


streamer: Agent[None, str] = Agent(_model(), name="pai_streamer", capabilities=[SteadDurability()])

agents = [refunds, streamer]
