"""An agent with a ``deps_type``, for ``stead serve`` without deps: its runs are read and its
questions answered over HTTP; only a process given ``--deps`` (or ``Runtime(deps=...)``)
drives it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import stead
from stead.testing import Reply, ScriptedModel


@dataclass
class Shop:
    """Stands for a live client: made in the process that drives the run."""

    name: str


def make_shop() -> Shop:
    return Shop(name="the test's shop")


@stead.tool(effect="read_only")
def order_status(order_id: int, ctx: stead.ToolContext[Shop]) -> str:
    """Look an order up in the shop."""
    return f"{ctx.deps.name}: order {order_id} shipped"


def build() -> list[stead.Agent]:
    model = ScriptedModel(
        [
            Reply(tool_calls=[("order_status", {"order_id": 42})]),
            Reply(tool_calls=[("ask_user", {"question": "Home or office?"})]),
            lambda request: f"It goes to your {request.messages[-1].content}.",
        ]
    )
    tools = [order_status, stead.question_tool(Literal["home", "office"])]
    limits = stead.Limits(approval_timeout=None)
    return [stead.Agent("shop", model, tools, deps_type=Shop, limits=limits)]


agents = build
