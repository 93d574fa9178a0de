"""Conversations and attachments in the store: the rows ``Runtime.send`` orders messages by,
and the bytes of images and documents, kept once per digest (migrations 0003, 0006).

A conversation is an ordered list of messages, one row each, at positions 0, 1, 2...; each
names the run that answers it. The order is the database's: the position is the primary key
with the conversation, taken in the insert itself (``MAX(position) + 1``), so of two
messages sent at once, in any two processes, one gets a position and the other is refused
by the key and takes the next: ordered, neither lost. A message id is unique in its
conversation, so a message sent again under its id finds its row instead of making one.
Written once in this mixin for both dialects (each statement runs as one atomic statement
on either).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypedDict, Unpack, runtime_checkable

from stead.errors import StoreError
from stead.store.sql._base import Duplicate


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationEntry:
    """One message of a conversation and the run that answers it."""

    conversation_id: str
    """The conversation (the runs' ``session_id``)."""
    position: int
    """Its place, from 0."""
    message_id: str
    """The sender's id for it (unique in the conversation)."""
    run_id: str
    """The run that answers it (created once the message before is answered)."""
    agent: str
    """The agent that answers it."""
    input: dict[str, Any]
    """``{"content": text, "attachments": [...]}``: what the run is created with."""
    created_at: float
    """When it was recorded."""


class Recording(TypedDict):
    """The keyword arguments of ``record_message``: defined once, for the contract and the
    SQL stores' implementation of it."""

    message_id: str
    """The sender's id of the message: a second send of it finds the first."""
    run_id: str
    """The run that answers it."""
    agent: str
    """That run's agent."""
    input: dict[str, Any]
    """``{"content": text, "attachments": [...]}``: what the run is created with."""
    now: float
    """When it is recorded."""


@runtime_checkable
class ConversationStore(Protocol):
    """What ``Runtime.send`` needs of a store besides ``Store`` (both SQL stores have it)."""

    async def record_message(
        self, conversation_id: str, **message: Unpack[Recording]
    ) -> tuple[ConversationEntry, bool]:
        """The message's row, and True when this call made it (False: it was there)."""
        ...

    async def conversation(self, conversation_id: str) -> list[ConversationEntry]:
        """Every message of the conversation, in order (empty for an unknown one)."""
        ...

    async def entry_of_run(self, run_id: str) -> ConversationEntry | None:
        """The message a run answers, if it answers one."""
        ...

    async def unanswered(
        self, *, since: float, until: float, limit: int
    ) -> list[ConversationEntry]:
        """Messages recorded in ``[since, until)`` whose run does not exist (their sender
        died between recording them and creating the run), oldest first."""
        ...

    async def put_blob(self, digest: str, media_type: str, data: bytes, *, now: float) -> None:
        """Keep ``data`` under ``digest`` (a second put of the same digest writes nothing)."""
        ...

    async def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The bytes of the digests the store holds (missing ones are left out)."""
        ...


class _Session(Protocol):
    async def all(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    async def one(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None: ...
    async def run(self, query: str, params: Sequence[Any] = ()) -> int: ...


_COLUMNS = "conversation_id, position, message_id, run_id, agent, input, created_at"
_RACES = 64
"""Inserts a send retries when other senders keep taking the next position first."""


def _entry(row: Sequence[Any]) -> ConversationEntry:
    try:
        data = json.loads(row[5])
    except ValueError as exc:
        raise StoreError(f"conversation {row[0]!r} position {row[1]}: input is not JSON") from exc
    return ConversationEntry(
        conversation_id=row[0],
        position=int(row[1]),
        message_id=row[2],
        run_id=row[3],
        agent=row[4],
        input=data if isinstance(data, dict) else {},
        created_at=float(row[6]),
    )


class ChatRows:
    """``ConversationStore`` over the shared SQL session (mixed into both SQL stores)."""

    PARAM: ClassVar[str]
    CONVERSATION_LOCK: ClassVar[str | None] = None
    """A statement that takes a lock on one conversation (its id the parameter) until the
    transaction ends, where writers do not queue on one lock already (PostgreSQL). A new
    message and the prune of the conversation's last run take it, so the prune's check that
    no message came after the run sees every message that commits before its delete."""

    def _reading(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def _writing(self, *, sync: bool = True) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.PARAM)

    async def record_message(
        self, conversation_id: str, **message: Unpack[Recording]
    ) -> tuple[ConversationEntry, bool]:
        """See ``ConversationStore.record_message``. The position is taken in the insert;
        a unique key that refuses it (another sender took that position, or this message id
        is recorded) sends us back to look again."""
        message_id, run_id, agent = message["message_id"], message["run_id"], message["agent"]

        by_id = self._q(
            f"SELECT {_COLUMNS} FROM conversation_messages "
            "WHERE conversation_id = ? AND message_id = ?"
        )
        insert = self._q(
            f"INSERT INTO conversation_messages ({_COLUMNS}) "
            "SELECT ?, COALESCE(MAX(position) + 1, 0), ?, ?, ?, ?, ? "
            "FROM conversation_messages WHERE conversation_id = ?"
        )
        text = json.dumps(message["input"], separators=(",", ":"), ensure_ascii=False)
        for _ in range(_RACES):
            async with self._reading() as s:
                row = await s.one(by_id, (conversation_id, message_id))
            if row is not None:
                return _entry(row), False
            try:
                async with self._writing() as s:
                    if self.CONVERSATION_LOCK is not None:
                        await s.one(self._q(self.CONVERSATION_LOCK), (conversation_id,))
                    params = (conversation_id, message_id, run_id, agent, text, message["now"])
                    await s.run(insert, (*params, conversation_id))
                    row = await s.one(by_id, (conversation_id, message_id))
            except Duplicate:
                continue
            if row is not None:
                return _entry(row), True
        raise StoreError(
            f"conversation {conversation_id!r}: could not take a position after {_RACES} "
            "tries (too many senders at once); send again"
        )

    async def conversation(self, conversation_id: str) -> list[ConversationEntry]:
        """See ``ConversationStore.conversation``."""
        async with self._reading() as s:
            rows = await s.all(
                self._q(
                    f"SELECT {_COLUMNS} FROM conversation_messages WHERE conversation_id = ? "
                    "ORDER BY position"
                ),
                (conversation_id,),
            )
        return [_entry(r) for r in rows]

    async def entry_of_run(self, run_id: str) -> ConversationEntry | None:
        """See ``ConversationStore.entry_of_run``."""
        async with self._reading() as s:
            row = await s.one(
                self._q(f"SELECT {_COLUMNS} FROM conversation_messages WHERE run_id = ?"),
                (run_id,),
            )
        return None if row is None else _entry(row)

    async def unanswered(
        self, *, since: float, until: float, limit: int
    ) -> list[ConversationEntry]:
        """See ``ConversationStore.unanswered`` (the index on ``created_at``, migration 0006,
        keeps a sweep to the messages since the last one)."""
        cols = ", ".join(f"m.{c}" for c in _COLUMNS.split(", "))
        async with self._reading() as s:
            rows = await s.all(
                self._q(
                    f"SELECT {cols} FROM conversation_messages m "
                    "WHERE m.created_at >= ? AND m.created_at < ? AND NOT EXISTS "
                    "(SELECT 1 FROM runs r WHERE r.run_id = m.run_id) "
                    "ORDER BY m.created_at, m.conversation_id, m.position LIMIT ?"
                ),
                (since, until, limit),
            )
        return [_entry(r) for r in rows]

    async def put_blob(self, digest: str, media_type: str, data: bytes, *, now: float) -> None:
        """See ``ConversationStore.put_blob``."""
        async with self._writing() as s:
            await s.run(
                self._q(
                    "INSERT INTO blobs (digest, media_type, data, created_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (digest) DO NOTHING"
                ),
                (digest, media_type, data, now),
            )

    async def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """See ``ConversationStore.get_blobs``."""
        wanted = sorted(set(digests))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        async with self._reading() as s:
            rows = await s.all(
                self._q(f"SELECT digest, data FROM blobs WHERE digest IN ({marks})"), wanted
            )
        return {r[0]: bytes(r[1]) for r in rows}
