"""A manager agent that hands the sending to a courier agent used as a tool
(``courier.as_tool(...)``), written as an Agents SDK user writes it, for child processes
(``oai_support`` has the send tool, its reconcile function, the model on the wire server and
the ledger of deliveries). Under stead each call of the courier tool is a child run."""

from __future__ import annotations

from agents import Agent, OpenAIChatCompletionsModel
from oai_support import find_sent, model, send_message
from openai import AsyncOpenAI

import stead
import stead.openai_agents as sa

MANAGER = "You delegate to the courier."
COURIER = "You send customers messages."


def build(client: AsyncOpenAI | None = None, **options: object) -> stead.Agent:
    """The manager (its models on ``client``, one of the environment's otherwise);
    ``options`` for ``durable``."""
    llm = model() if client is None else OpenAIChatCompletionsModel("gpt-4.1", openai_client=client)
    courier = Agent(name="courier", instructions=COURIER, model=llm, tools=[send_message])
    deliver = courier.as_tool("deliver", "Have the courier send a message.")
    manager = Agent(name="manager", instructions=MANAGER, model=llm, tools=[deliver])
    # send_message belongs to the agent used as a tool; its settings come from the mapping.
    return sa.durable(
        manager,
        tools={"send_message": {"effect": "non_idempotent", "reconcile": find_sent}},
        **options,  # type: ignore[arg-type]
    )


agent = build()
