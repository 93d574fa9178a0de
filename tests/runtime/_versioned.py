"""A versioned agent for the version tests: ``stead worker --agents _versioned:agents`` serves
the version named by ``$STEAD_TEST_VERSION``, and its tool writes which version ran which
run to ``$STEAD_TEST_TOOL_LOG``."""

from __future__ import annotations

import os

import stead
from stead.testing import Reply, ScriptedModel


@stead.tool(effect="non_idempotent", requires_approval=lambda a: True)
def refund(order_id: int, ctx: stead.ToolContext) -> str:
    """Refund an order."""
    with open(os.environ["STEAD_TEST_TOOL_LOG"], "a") as f:
        f.write(f"{os.environ.get('STEAD_TEST_VERSION', '?')} {ctx.run_id}\n")
    return "refunded"


def agent(version: str, on_change: str = "pin") -> stead.Agent:
    script = [Reply(tool_calls=[("refund", {"order_id": 1})]), Reply(text=f"done by {version}")]
    return stead.Agent(
        "refunds",
        ScriptedModel(script),
        [refund],
        version=version,
        on_change=on_change,  # type: ignore[arg-type]
    )


def agents() -> list[stead.Agent]:
    return [agent(os.environ["STEAD_TEST_VERSION"])]
