"""The rows behind agent versions across deploys (migration 0010): a run's pin, and the
versions live workers drive (``stead.core.versions`` decides; docs/lifecycle.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stead.store.lifecycle._transfer import atomic, q, sql_store
from stead.store.sql import Store


async def pin(store: Store, run_id: str, fingerprint: str) -> None:
    """Pin the run to an agent version (the first pin stands: it is the version that
    recorded the run). Claims that pass their fingerprints skip it from now on."""
    s = sql_store(store)
    async with atomic(s) as tx:
        await tx.run(
            q(
                s,
                "INSERT INTO run_pins (run_id, fingerprint) VALUES (?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
            ),
            (run_id, fingerprint),
        )


async def announce(
    store: Store, owner: str, versions: Sequence[tuple[str, str]], *, until: float
) -> None:
    """Say that worker ``owner`` drives these (agent, fingerprint) versions until ``until``
    (renewed while it runs)."""
    s = sql_store(store)
    async with atomic(s) as tx:
        for agent, fp in versions:
            await tx.run(
                q(
                    s,
                    "INSERT INTO worker_versions (owner, fingerprint, agent, expires_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (owner, fingerprint) "
                    "DO UPDATE SET expires_at = excluded.expires_at",
                ),
                (owner, fp, agent, until),
            )


async def retire(store: Store, owner: str) -> None:
    """A worker stopping: its versions are no longer served by it."""
    s = sql_store(store)
    async with atomic(s) as tx:
        await tx.run(q(s, "DELETE FROM worker_versions WHERE owner = ?"), (owner,))


@dataclass(frozen=True, slots=True, kw_only=True)
class Stranded:
    """A run waiting for a worker of a version no live worker drives."""

    run_id: str
    agent: str
    fingerprint: str


async def stranded(store: Store, *, now: float, limit: int = 100) -> list[Stranded]:
    """Runs pinned to a version no live worker has announced (``announce``), that are not
    finished or waiting on a person: nothing will drive them until such a worker starts."""
    s = sql_store(store)
    async with s._reading() as db:
        rows = await db.all(
            q(
                s,
                "SELECT r.run_id, r.agent, p.fingerprint FROM run_pins p JOIN runs r "
                "ON r.run_id = p.run_id WHERE r.status IN ('queued', 'running', "
                "'awaiting_tool') AND NOT EXISTS (SELECT 1 FROM worker_versions w "
                "WHERE w.fingerprint = p.fingerprint AND w.expires_at > ?) "
                "ORDER BY r.updated_at LIMIT ?",
            ),
            (now, limit),
        )
    return [Stranded(run_id=r[0], agent=r[1], fingerprint=r[2]) for r in rows]
