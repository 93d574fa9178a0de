"""The seed scenario's agent, written as an Agents SDK user writes it, for child processes.

Its model is the SDK's own ``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI`` client
pointed at the suite's wire server (``OAI_BASE_URL``). Every delivery of ``send_message`` is
one line in the file ``STEAD_TEST_LEDGER``: the outside world the test counts deliveries in.
``find_sent`` asks that world whether a message with the call's idempotency key went out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

import stead
import stead.openai_agents as sa

set_tracing_disabled(True)


def ledger() -> Path:
    return Path(os.environ.get("STEAD_TEST_LEDGER", "deliveries.jsonl"))


def deliveries() -> list[dict[str, Any]]:
    if not ledger().exists():
        return []
    return [json.loads(line) for line in ledger().read_text().splitlines() if line]


def find_sent(to: str, text: str, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
    for sent in deliveries():
        if sent["key"] == ctx.idempotency_key:
            return stead.Done({"delivered": True, "id": sent["id"]})
    return stead.NotDone()


@sa.effect("read_only")
@function_tool
def find_customer(email: str) -> dict[str, str]:
    """Look a customer up by email."""
    return {"name": "Ada", "email": email}


@function_tool(needs_approval=os.environ.get("SUPPORT_APPROVAL") == "1")
def send_message(to: str, text: str) -> dict[str, Any]:
    """Send a message to a customer."""
    n = len(deliveries()) + 1
    with ledger().open("a") as f:
        key = sa.tool_context().idempotency_key
        f.write(json.dumps({"id": n, "to": to, "text": text, "key": key}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return {"delivered": True, "id": n}


def model() -> OpenAIChatCompletionsModel:
    url = os.environ.get("OAI_BASE_URL", "http://127.0.0.1:9")
    client = AsyncOpenAI(api_key="sk-test", base_url=url + "/v1", max_retries=0)
    return OpenAIChatCompletionsModel("gpt-4.1", openai_client=client)


def build(**options: Any) -> stead.Agent:
    """The agent (its model read from the environment now); ``options`` for ``durable``."""
    sdk_agent = Agent(
        name="support",
        instructions="You help customers.",
        model=model(),
        tools=[find_customer, send_message],
    )
    # send_message's settings by name, beside find_customer's decorator: both ways work.
    mode = "effects" if os.environ.get("STEAD_DURABILITY") == "effects" else "strict"
    return sa.durable(
        sdk_agent,
        tools={"send_message": {"effect": "non_idempotent", "reconcile": find_sent}},
        durability=mode,
        **options,
    )


agent = build()
