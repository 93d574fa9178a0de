"""A triage agent that hands customers off to the seed scenario's support agent, written as
an Agents SDK user writes it, for child processes (``oai_support`` has the tools, the model
on the wire server and the ledger of deliveries)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, handoff
from oai_support import find_sent, ledger, model, send_message
from openai import AsyncOpenAI

import stead
import stead.openai_agents as sa

TRIAGE = "You route customers to the right agent."
SUPPORT = "You help customers."


def handed_over() -> Path:
    """Where ``on_handoff`` notes each time it ran (beside the deliveries): the outside
    world a handoff callback may touch."""
    return Path(f"{ledger()}.handoffs")


def note_handoff(ctx: Any) -> None:
    with handed_over().open("a") as f:
        f.write(f"{os.getpid()}\n")


def build(client: AsyncOpenAI | None = None) -> stead.Agent:
    """The agent, its models on ``client`` (one of the environment's otherwise): a test
    that drives it in its own event loop closes the client it gave."""
    llm = model() if client is None else OpenAIChatCompletionsModel("gpt-4.1", openai_client=client)
    support = Agent(name="support", instructions=SUPPORT, model=llm, tools=[send_message])
    triage = Agent(
        name="triage",
        instructions=TRIAGE,
        model=llm,
        handoffs=[handoff(support, on_handoff=note_handoff)],
    )
    # send_message belongs to the agent handed to; its settings come from the same mapping.
    return sa.durable(
        triage, tools={"send_message": {"effect": "non_idempotent", "reconcile": find_sent}}
    )


agent = build()
