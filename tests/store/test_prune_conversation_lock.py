"""On PostgreSQL (read committed), a message sent to a conversation and the prune of the
conversation's last run serialize on the conversation: the prune's check that no message
came after the run sees a message that commits before its delete, so a conversation never
holds a message whose run would read its history from a deleted run. A raw transaction
plays the sender: it takes the conversation's lock as `record_message` does, records the
next message, and commits only once the prune is waiting on it."""

from __future__ import annotations

import asyncio
import json
import time

import psycopg

import stead
from _wait import until_async
from stead.core.retention import Retention
from stead.testing import Reply, ScriptedModel


async def _waiters(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> int:
    """Transactions of this database waiting on an advisory lock."""
    cur = await conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND NOT l.granted AND a.datname = current_database()"
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_a_message_sent_while_its_run_is_pruned_keeps_the_run(pg_url: str) -> None:
    chat = stead.Agent("chat", ScriptedModel([Reply(text="hi")] * 4), [])
    async with stead.Runtime(pg_url, agents=[chat]) as rt:
        first = await rt.send("c-1", "first", agent=chat)
        assert first.status.value == "completed"
        lock = type(rt.store).CONVERSATION_LOCK  # type: ignore[attr-defined]
        assert lock is not None
        async with await psycopg.AsyncConnection.connect(pg_url) as sender:
            await sender.execute(lock.replace("?", "%s"), ("c-1",))
            await sender.execute(
                "INSERT INTO conversation_messages (conversation_id, position, message_id, "
                "run_id, agent, input, created_at) VALUES (%s, 1, 'm-2', 'run_next', 'chat', "
                "%s, %s)",
                ("c-1", json.dumps({"role": "user", "content": "second"}), time.time()),
            )
            pruning = asyncio.create_task(rt.prune(Retention(keep={"completed": 0}), apply=True))
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as look:

                async def reached() -> bool:
                    return pruning.done() or await _waiters(look)

                # The prune reaches the lock (or, without it, is done).
                await until_async(reached, "the prune at the lock", timeout=30)
                assert not pruning.done(), "the prune did not wait for the sender"
            await sender.commit()
            pruned = await pruning
        assert first.run_id not in [rid for rid, _ in pruned.runs]
        assert (await rt.get(first.run_id)).status.value == "completed"


async def test_a_message_waits_for_a_prune_of_its_conversation_to_commit(pg_url: str) -> None:
    chat = stead.Agent("chat", ScriptedModel([Reply(text="hi")] * 4), [])
    async with stead.Runtime(pg_url, agents=[chat]) as rt:
        await rt.send("c-2", "first", agent=chat)
        lock = type(rt.store).CONVERSATION_LOCK  # type: ignore[attr-defined]
        async with await psycopg.AsyncConnection.connect(pg_url) as pruner:
            await pruner.execute(lock.replace("?", "%s"), ("c-2",))
            sending = asyncio.create_task(rt.send("c-2", "second"))
            async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as look:

                async def reached() -> bool:
                    return sending.done() or await _waiters(look)

                await until_async(reached, "the message at the lock", timeout=30)
                assert not sending.done(), "the message did not wait for the conversation"
            await pruner.rollback()
        second = await sending
        assert second.status.value == "completed"
        users = [m.content for m in second.messages if m.role == "user"]
        assert users == ["first", "second"]
