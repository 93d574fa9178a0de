"""The store's half of conversations and attachments (migration 0003), on both backends:
positions handed out by the database (two senders at once never share one, neither is
lost), a message id found again instead of recorded twice, and attachment bytes kept once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from _backends import Backend

from stead.store.sql._chat import ConversationStore


def _chat(store: Any) -> ConversationStore:
    assert isinstance(store, ConversationStore)
    return store


async def test_positions_are_handed_out_in_order_and_ids_are_found_again(
    backend: Backend,
) -> None:
    chat = _chat(backend.open())

    async def send(n: int, mid: str) -> Any:
        entry, fresh = await chat.record_message(
            "c", message_id=mid, run_id=f"run_{n}", agent="a", input={"content": mid}, now=n
        )
        return entry, fresh

    first, fresh = await send(0, "m0")
    assert (first.position, first.run_id, fresh) == (0, "run_0", True)
    again, fresh = await send(9, "m0")  # the same message id: its row, not a new one
    assert (again, fresh) == (first, False)
    assert await chat.entry_of_run("run_0") == first
    assert await chat.entry_of_run("nobody") is None
    assert await chat.conversation("other") == []


async def test_senders_in_several_connections_at_once_get_distinct_positions(
    backend: Backend,
) -> None:
    stores = [_chat(backend.open()) for _ in range(4)]

    async def send(i: int) -> int:
        entry, _ = await stores[i % 4].record_message(
            "c", message_id=f"m{i}", run_id=f"run_{i}", agent="a", input={"n": i}, now=0.0
        )
        return entry.position

    positions = await asyncio.gather(*(send(i) for i in range(16)))
    assert sorted(positions) == list(range(16))
    rows = await stores[0].conversation("c")
    assert [r.position for r in rows] == list(range(16))
    assert {r.message_id for r in rows} == {f"m{i}" for i in range(16)}


async def test_a_blob_is_stored_once(backend: Backend) -> None:
    chat = _chat(backend.open())
    for _ in range(3):
        await chat.put_blob("sha256:ab", "image/png", b"\x89PNG\x00\xff", now=1.0)
    assert await chat.get_blobs(["sha256:ab", "sha256:missing"]) == {
        "sha256:ab": b"\x89PNG\x00\xff"
    }
    assert await chat.get_blobs([]) == {}
    assert backend.sql("SELECT COUNT(*) FROM blobs") == [(1,)]
