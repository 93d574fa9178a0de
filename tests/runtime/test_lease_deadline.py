"""A drive's local lease deadline: it fires the run's abort signal when no renewal was
confirmed in time, before the lease lapses in the store, and not while renewals keep coming.

On PostgreSQL the store is reached through a relay process (``_relay``) that the test
freezes with SIGSTOP: every statement on the drive's connections then hangs as on a dead
network (the kernel takes the bytes; no answer ever comes), the keeper's renewal with them.
On SQLite another process takes the file's write lock and keeps it: each renewal waits for
it on the event loop's own thread, which no timer can interrupt, so only a busy timeout
derived from the lease (shorter than its margin) lets the deadline's timer run in time.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _relay import Relay

import stead
from _wait import until_async
from stead._lease import LAPSED
from stead.errors import Fenced
from stead.store import open_store
from stead.store.postgres import PostgresStore
from stead.testing import Reply, ScriptedModel

pytestmark = pytest.mark.timeout(120)


class Watch:
    """What the tool saw: that it started, and when and why its lease was lost."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.lost: list[tuple[float, str, bool]] = []


def holding_agent() -> stead.Agent:
    @stead.tool(effect="non_idempotent")
    async def hold_on(ctx: stead.ToolContext[Watch]) -> str:
        """Work until the lease is lost."""
        ctx.deps.started.set()
        reason = await ctx.lease_lost()
        ctx.deps.lost.append((time.time(), reason, ctx.aborted))
        return "stopped"

    model = ScriptedModel([Reply(tool_calls=[("hold_on", {})]), "Done."])
    return stead.Agent("holding", model, [hold_on], deps_type=Watch)


async def test_a_renewal_stuck_on_a_dead_connection_fires_the_abort_before_the_lease_lapses(
    pg_url: str,
) -> None:
    relay = Relay(pg_url)
    through = PostgresStore(relay.url)
    direct = open_store(pg_url)
    watch = Watch()
    agent = holding_agent()
    try:
        async with stead.Runtime(through, agents=[agent], lease_ttl=3, deps=watch) as rt:
            run_id = await rt.start(agent, "hold on")
            drive = asyncio.ensure_future(rt.run(run_id))
            await asyncio.wait_for(watch.started.wait(), 60)
            relay.signal(signal.SIGSTOP)  # from now on nothing the drive sends is answered
            await until_async(
                lambda: watch.lost or drive.done(),
                "the lease lost (or the drive ended)",
                timeout=30,
            )
            # The store's view while the drive is still cut off: its last confirmed renewal.
            record = await direct.get_run(run_id)
            relay.signal(signal.SIGCONT)
            with pytest.raises(Fenced):
                await asyncio.wait_for(drive, 60)
        [(lost_at, reason, aborted)] = watch.lost
        assert reason == LAPSED and aborted
        # The abort fired while the store still counted the lease as the drive's: nobody
        # could have taken the run over yet.
        assert record.lease_owner == rt.owner and record.lease_expires_at is not None
        assert lost_at < record.lease_expires_at
    finally:
        relay.stop()
        await direct.close()


LOCKER = (
    "import sqlite3, sys\n"
    "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "db.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)
"""A process that takes a SQLite file's write lock and holds it until it is killed."""


async def test_a_renewal_stuck_on_a_locked_sqlite_file_fires_the_abort_before_the_lease_lapses(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    watch = Watch()
    agent = holding_agent()
    async with stead.Runtime(f"sqlite:///{path}", agents=[agent], lease_ttl=2, deps=watch) as rt:
        run_id = await rt.start(agent, "hold on")
        drive = asyncio.ensure_future(rt.run(run_id))
        await asyncio.wait_for(watch.started.wait(), 60)
        locker = subprocess.Popen(  # noqa: ASYNC220 - starting it blocks no longer than a fork
            [sys.executable, "-c", LOCKER, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert locker.stdout is not None
            assert await asyncio.to_thread(locker.stdout.readline) == "locked\n"
            await until_async(
                lambda: watch.lost or drive.done(),
                "the lease lost (or the drive ended)",
                timeout=30,
            )
            # A read is not held up by the write lock (WAL): the store's view while every
            # renewal still fails, its last confirmed one.
            record = await rt.store.get_run(run_id)
        finally:
            locker.kill()
            locker.communicate(timeout=30)
        with pytest.raises(Fenced):
            await asyncio.wait_for(drive, 60)
    [(lost_at, reason, aborted)] = watch.lost
    assert reason == LAPSED and aborted
    assert record.lease_owner == rt.owner and record.lease_expires_at is not None
    assert lost_at < record.lease_expires_at


async def test_a_lease_renewed_in_time_is_never_lost(tmp_path: Path) -> None:
    """Renewals confirmed by the store move the deadline on: a tool that works for over two
    TTLs is not aborted. (A 4 s lease: the keeper renews every third of it, so the event
    loop may be starved for over a second, as on a loaded machine, before a renewal is late.)"""
    watch = Watch()

    @stead.tool(effect="non_idempotent")
    async def work_long(ctx: stead.ToolContext[Watch]) -> str:
        """Work for over two TTLs, then report whether the lease held."""
        await asyncio.sleep(9.0)
        ctx.deps.lost.append((time.time(), "", ctx.aborted))
        return "worked"

    model = ScriptedModel([Reply(tool_calls=[("work_long", {})]), "Done."])
    agent = stead.Agent("long", model, [work_long], deps_type=Watch)
    async with stead.Runtime(
        f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent], lease_ttl=4, deps=watch
    ) as rt:
        view = await rt.run(await rt.start(agent, "work"))
    assert view.status.value == "completed"
    assert [aborted for _, _, aborted in watch.lost] == [False]
