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
    # OwnedRun's snapshot cadence (every 256 events) keeps the resume tail short
    assert len((await store.load(run_id)).tail) < 256
    # The file itself, after a checkpoint: page overhead and the pages a snapshot rewrite
    # frees come on top of the payload (2.1x measured; the compressed snapshot keeps it low).
    if footprint:
        assert footprint <= 3 * messages, numbers


# -- large results: the bytes on disk near the content --------------------------------------

BIG_TURNS = 150


@stead.tool(effect="read_only")
def fetch_page(page: int) -> str:
    """A page of about 1 KB of JSON whose values change from page to page."""
    rows = [
        {"order_id": f"ord-{(page * 7919 + k * 104729) % 10**6:06d}", "status": FIELDS[k % 8],
         "total": (page * 31 + k * 17) % 1000 + 0.99, "note": f"page {page} line {k}"}
        for k in range(11)
    ]  # fmt: skip
    return json.dumps({"page": page, "orders": rows})


def _pg_live(backend: Backend) -> int:
    """Bytes the schema's tables, TOAST tables and indexes hold once their dead row versions
    are gone (``VACUUM FULL`` rewrites each compactly; autovacuum frees the same space for
    reuse): every append updates the run's row and every snapshot replaces the last."""
    tables = backend.sql("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    for (table,) in tables:
        backend.sql(f"VACUUM FULL {table}")
    [(size,)] = backend.sql(
        "WITH t AS (SELECT c.oid FROM pg_class c WHERE c.relkind = 'r' "
        "AND c.relnamespace = current_schema()::regnamespace), "
        "h AS (SELECT oid FROM t UNION SELECT reltoastrelid FROM pg_class "
        "WHERE oid IN (SELECT oid FROM t) AND reltoastrelid <> 0), "
        "r AS (SELECT oid FROM h UNION SELECT indexrelid FROM pg_index "
        "WHERE indrelid IN (SELECT oid FROM h)) "
        "SELECT SUM(pg_relation_size(r.oid)) FROM r"
    )
    return int(size)


async def test_a_run_of_1kb_results_stays_within_twice_its_content(
    store: Store, backend: Backend
) -> None:
    """Rows of a KB used to spill into overflow pages of their own on SQLite (4.4x the
    content) and were stored uncompressed on PostgreSQL (3.6x); migration 0007 and the
    compressed large rows keep both within 2x (``bench/storage.py`` prints the figures)."""
    assert 900 <= len(fetch_page(7)) <= 1100
    replies: list[Reply | str] = [
        Reply(tool_calls=[("fetch_page", {"page": t})]) for t in range(BIG_TURNS)
    ]
    agent = stead.Agent(
        "pages",
        ScriptedModel([*replies, "Done."]),
        tools=[fetch_page],
        limits=stead.Limits(max_turns=BIG_TURNS + 5),
    )
    empty = backend.footprint() if backend.name == "sqlite" else _pg_live(backend)
    rt = stead.Runtime(store, agents=[agent])
    run_id = await rt.start(agent, "Read every page.")
    assert (await rt.run(run_id)).status == stead.RunStatus.COMPLETED
    state = await rt.state(run_id)
    content = len(json.dumps([message_to_json(m) for m in state.messages]))
    full = backend.footprint() if backend.name == "sqlite" else _pg_live(backend)
    assert full is not None and empty is not None
    assert full - empty <= 2 * content, (full - empty, content)
    assert [s.event for s in await store.read_events(run_id)][-1].kind == "run_completed"
