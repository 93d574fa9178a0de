"""Space is linear in the conversation: each message is stored once, plus bounded overhead.

A 500-turn run driven by the real Runtime and ScriptedModel (one tool call a turn, realistic
sizes). The stored payload (event data plus the one snapshot) must stay within 3x the JSON of
the conversation itself; a store that re-wrote the history with every turn would be
quadratic and fail by a wide margin.
"""

from __future__ import annotations

import json

import pytest
from _backends import Backend

import stead
from stead.core.messages import message_to_json
from stead.store import Store
from stead.testing import Reply, ScriptedModel

pytestmark = pytest.mark.timeout(90)

TURNS = 500
FIELDS = ["order_id", "status", "eta", "carrier", "items", "total", "currency", "address"]


@stead.tool(effect="read_only")
def search_orders(customer: str, query: str, fields: list[str], limit: int = 10) -> str:
    """Search a customer's orders."""
    n = int(customer.rsplit("-", 1)[1])
    matches = [
        {"order_id": f"ord-{n:05d}-{k}", "status": "shipped", "eta": f"2024-05-{10 + k:02d}",
         "carrier": "DHL Express", "total": f"{(n * 7 + k) % 500}.99"}
        for k in range(2)
    ]  # fmt: skip
    return json.dumps({"customer": customer, "limit": limit, "matches": matches})


def arguments(turn: int) -> dict[str, object]:
    return {
        "customer": f"cust-{turn:05d}",
        "query": f"orders placed in the last 90 days that shipped from warehouse {turn % 7} "
        "and are still in transit, excluding returns and cancelled lines",
        "fields": FIELDS,
        "limit": 10,
    }


def text(turn: int) -> str:
    return (
        f"Turn {turn}: before answering I will check the order history of customer "
        f"cust-{turn:05d}, look for shipped orders that are still in transit and compare "
        "each carrier ETA with the date the customer was promised."
    )


def script() -> list[Reply | str]:
    replies: list[Reply | str] = [
        Reply(text=text(t), tool_calls=[("search_orders", arguments(t))]) for t in range(TURNS)
    ]
    replies.append("All in-transit orders are on schedule; none needs escalation. " * 3)
    return replies


def test_the_sizes_are_realistic() -> None:
    """The premise of the bound: ~200-400 byte arguments and results, ~200 byte texts."""
    for t in (0, TURNS - 1):
        args = json.dumps(arguments(t))
        assert 200 <= len(args) <= 400
        assert 200 <= len(search_orders("cust-00042", "q", FIELDS)) <= 400
        assert 180 <= len(text(t)) <= 260


async def test_a_500_turn_run_stores_linear_space(
    store: Store, backend: Backend, record_property: pytest.RecordProperty
) -> None:
    agent = stead.Agent(
        "orders",
        ScriptedModel(script()),
        tools=[search_orders],
        system="You track orders.",
        limits=stead.Limits(max_turns=600),
    )
    rt = stead.Runtime(store, agents=[agent])  # the fixture closes the store
    run_id = await rt.start(agent, "Are any of my customers' orders late?")
    view = await rt.run(run_id)
    assert (view.status, view.turns) == (stead.RunStatus.COMPLETED, TURNS + 1)

    state = await rt.state(run_id)
    assert len(state.messages) == 1 + 2 * TURNS + 1
    messages = len(json.dumps([message_to_json(m) for m in state.messages]))
    payload = store.payload_bytes(run_id)  # type: ignore[attr-defined]
    footprint = backend.footprint()
    events = (await store.get_run(run_id)).last_seq

    numbers = {
        "events": events,
        "messages_json_bytes": messages,
        "payload_bytes": payload,
        "payload_ratio": round(payload / messages, 3),
        "footprint_bytes": footprint,
        "footprint_ratio": round(footprint / messages, 3) if footprint else None,
    }
    for k, v in numbers.items():
        record_property(k, v)
    print(f"\nspace after {TURNS} turns: {numbers}")

    assert payload <= 3 * messages, numbers
    # RunSession's snapshot cadence (every 256 events) keeps the resume tail short
    assert len((await store.load(run_id)).tail) < 256
    # The file itself, after a checkpoint: page overhead and the pages a snapshot rewrite
    # frees come on top of the payload (2.1x measured; the compressed snapshot keeps it low).
    if footprint:
        assert footprint <= 3 * messages, numbers
