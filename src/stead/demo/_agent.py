"""The demo agent: look an order up (read_only), then message on-call (non_idempotent).

``send_message`` talks to the message service over HTTP; its reconcile function asks the
service, by idempotency key, whether the message already went out.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

import stead
from stead.testing import Reply, ScriptedModel

ORDERS = {42: {"order_id": 42, "status": "shipped", "carrier": "DHL", "eta": "2026-12-02"}}


def _service() -> str:
    return os.environ.get("STEAD_DEMO_SERVICE", "http://127.0.0.1:8765")


@stead.tool(effect="read_only")
def lookup_order(order_id: int) -> dict[str, Any]:
    """Look up an order by id."""
    order = ORDERS.get(order_id)
    if order is None:
        raise KeyError(f"no order {order_id}")
    return order


def find_message(to: str, body: str, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
    """Reconcile: did a message with this call's idempotency key go out?"""
    url = f"{_service()}/messages?idempotency_key={ctx.idempotency_key}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        found = json.loads(resp.read())["messages"]
    if found:
        return stead.Done({"message_id": found[0]["message_id"], "to": found[0]["to"]})
    return stead.NotDone()


@stead.tool(effect="non_idempotent", reconcile=find_message)
def send_message(to: str, body: str, ctx: stead.ToolContext) -> dict[str, Any]:
    """Send a message. Every call sends a new one: never repeat it blindly."""
    req = urllib.request.Request(
        f"{_service()}/messages",
        data=json.dumps({"to": to, "body": body}).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": ctx.idempotency_key},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        sent = json.loads(resp.read())
    return {"message_id": sent["message_id"], "to": sent["to"]}


def build_agent() -> stead.Agent:
    """The agent, on a ScriptedModel so the demo needs no API key."""
    model = ScriptedModel(
        [
            Reply(text="Let me check the order.", tool_calls=[("lookup_order", {"order_id": 42})]),
            Reply(
                text="Order 42 has shipped; telling on-call.",
                tool_calls=[
                    (
                        "send_message",
                        {"to": "on-call", "body": "Order 42 shipped with DHL, ETA 2026-12-02."},
                    )
                ],
            ),
            "On-call knows: order 42 shipped with DHL and arrives 2026-12-02.",
        ]
    )
    return stead.Agent(
        "order-notifier",
        model,
        [lookup_order, send_message],
        system="You help the support team. Look orders up and tell on-call about them.",
    )


agents = [build_agent()]
"""What ``stead resume RUN --agents stead.demo._agent:agents`` loads."""
