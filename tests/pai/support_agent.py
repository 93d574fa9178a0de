"""The seed scenario's agent, written as a Pydantic AI user writes it, for child processes.

Its model is Pydantic AI's own ``AnthropicModel`` or ``OpenAIChatModel`` (official SDKs)
pointed at the suite's wire server (``PAI_BASE_URL``; ``PAI_PROVIDER`` picks which). Every
delivery of ``send_message`` is one line in the file ``STEAD_TEST_LEDGER``: the outside world
the test counts deliveries in. ``find_sent`` asks that world whether a message with the
call's idempotency key went out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ApprovalRequired, RunContext
from pydantic_ai.models import Model

import stead
from stead.pydantic_ai import SteadDurability, tool_context


def ledger() -> Path:
    return Path(os.environ.get("STEAD_TEST_LEDGER", "deliveries.jsonl"))


def model() -> Model:
    url = os.environ.get("PAI_BASE_URL", "http://127.0.0.1:9")
    if os.environ.get("PAI_PROVIDER", "anthropic") == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel(
            "claude-sonnet-4-6", provider=AnthropicProvider(api_key="sk-ant-test", base_url=url)
        )
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(
        "gpt-4.1", provider=OpenAIProvider(api_key="sk-test", base_url=url + "/v1")
    )


def deliveries() -> list[dict[str, Any]]:
    if not ledger().exists():
        return []
    return [json.loads(line) for line in ledger().read_text().splitlines() if line]


def find_sent(to: str, text: str, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
    for sent in deliveries():
        if sent["key"] == ctx.idempotency_key:
            return stead.Done({"delivered": True, "id": sent["id"]})
    return stead.NotDone()


def build(
    durability: str = "strict", *, more: Sequence[Any] = (), **options: Any
) -> Agent[None, str]:
    """The agent; ``more`` capabilities after SteadDurability, ``options`` for it."""
    agent = Agent(
        model(),
        name="support",
        capabilities=[SteadDurability(durability=durability, **options), *more],  # type: ignore[arg-type]
    )

    @agent.tool_plain(metadata={"stead": {"effect": "read_only"}})
    def find_customer(email: str) -> dict[str, str]:
        """Look a customer up by email."""
        return {"name": "Ada", "email": email}

    asks = os.environ.get("SUPPORT_APPROVAL") == "tool"  # the tool asks, while running

    @agent.tool(
        metadata={"stead": {"effect": "non_idempotent", "reconcile": find_sent}},
        requires_approval=os.environ.get("SUPPORT_APPROVAL") == "1",
    )
    def send_message(ctx: RunContext[None], to: str, text: str) -> dict[str, Any]:
        """Send a message to a customer."""
        if asks and not ctx.tool_call_approved:
            raise ApprovalRequired()
        n = len(deliveries()) + 1
        with ledger().open("a") as f:
            f.write(
                json.dumps({"id": n, "to": to, "text": text, "key": tool_context().idempotency_key})
                + "\n"
            )
            f.flush()
            os.fsync(f.fileno())
        return {"delivered": True, "id": n}

    return agent


agent = build(os.environ.get("STEAD_DURABILITY", "strict"))
