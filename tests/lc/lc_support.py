"""The seed scenario's agent, written as a LangChain user writes it, for child processes.

``create_agent`` on LangChain's own ``ChatOpenAI`` (the official OpenAI client) pointed at the
suite's wire server (``LC_BASE_URL``), with stead's middleware. Every delivery of
``send_message`` is one line in the file ``STEAD_TEST_LEDGER``: the outside world the test
counts deliveries in. ``find_sent`` asks that world whether a message with the call's
idempotency key went out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import stead
import stead.langchain as sl


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


@tool
def find_customer(email: str) -> dict[str, str]:
    """Look a customer up by email."""
    return {"name": "Ada", "email": email}


find_customer.metadata = {"stead": {"effect": "read_only"}}


@sl.effect("non_idempotent", reconcile=find_sent)
@tool
def send_message(to: str, text: str) -> dict[str, Any]:
    """Send a message to a customer."""
    n = len(deliveries()) + 1
    with ledger().open("a") as f:
        key = sl.tool_context().idempotency_key
        f.write(json.dumps({"id": n, "to": to, "text": text, "key": key}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return {"delivered": True, "id": n}


def model() -> ChatOpenAI:
    url = os.environ.get("LC_BASE_URL", "http://127.0.0.1:9")
    return ChatOpenAI(
        model="gpt-4.1", api_key="sk-test", base_url=url + "/v1", streaming=True, max_retries=0
    )


graph = create_agent(
    model(),
    [find_customer, send_message],
    system_prompt="You help customers.",
    name="support",
    middleware=[sl.SteadMiddleware()],
)
agent = sl.durable(
    graph, durability="effects" if os.environ.get("STEAD_DURABILITY") == "effects" else "strict"
)
