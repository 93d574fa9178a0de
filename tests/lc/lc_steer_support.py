"""A LangChain agent steered from other processes (``stead approve``, ``stead cancel``) while
``stead worker`` drives it: the seed scenario's send, gated on a person, and a tool that
waits until its call is aborted. Marks go to the directory ``STEAD_TEST_MARKS``."""

from __future__ import annotations

import os
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.tools import tool
from lc_support import find_sent, model, send_message

import stead.langchain as sl

# The seed's send, here gated on a person: the same tool, its stead settings its own.
gated = send_message.model_copy(
    update={
        "metadata": {
            "stead": {"effect": "non_idempotent", "reconcile": find_sent, "requires_approval": True}
        }
    }
)


def marks() -> Path:
    return Path(os.environ.get("STEAD_TEST_MARKS", "."))


@sl.effect("read_only")
@tool
async def wait_for_parcel() -> str:
    """Wait until the parcel arrives."""
    (marks() / "started").touch()
    await sl.tool_context().signal.wait()
    (marks() / "aborted").touch()
    return "stopped waiting"


graph = create_agent(
    model(),
    [gated, wait_for_parcel],
    system_prompt="You help customers.",
    name="desk",
    middleware=[sl.SteadMiddleware()],
)
agent = sl.durable(graph)
