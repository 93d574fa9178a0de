"""One keeper per Runtime renews the leases of every run it drives and hears a cancel request
written by another process for each: no heartbeat or watcher task per run. On a virtual
clock: production's lease and beat, no second of them waited for."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import stead
from stead.core.states import RunStatus
from stead.testing import Reply, ScriptedModel, VirtualClock

RUNS = 4
started: list[int] = []


@stead.tool(effect="read_only")
async def hold(n: int) -> str:
    """Wait until cancelled."""
    started.append(n)
    await asyncio.Event().wait()
    return "never"


def _keepers() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "Keeper._keep"]


async def _until(check: object, what: str) -> None:
    """Poll ``check`` every virtual tenth of a second, for at most a virtual minute."""
    for _ in range(600):
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class _Counted:
    """The real store, with the lease and watch calls counted (and the runs each covered)."""

    def __init__(self, store: stead.store.Store) -> None:
        self.store = store
        self.calls: Counter[str] = Counter()
        self.covered: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def get_run(self, run_id: str) -> stead.store.RunRecord:
        self.calls["get_run"] += 1
        return await self.store.get_run(run_id)

    async def renew(self, run_id: str, **kw: Any) -> None:
        self.calls["renew"] += 1
        await self.store.renew(run_id, **kw)

    async def renew_leases(self, leases: Sequence[tuple[str, int]], **kw: Any) -> list[str]:
        self.calls["renew_leases"] += 1
        return await self.store.renew_leases(leases, **kw)

    async def last_seqs(self, run_ids: Sequence[str]) -> dict[str, int]:
        self.calls["last_seqs"] += 1
        self.covered.append(len(run_ids))
        return await self.store.last_seqs(run_ids)


def test_one_keeper_renews_every_lease_and_hears_every_cancel(tmp_path: Path) -> None:
    # Production's lease and beat, in virtual time: the renewals a 30 s lease needs and the
    # cancels heard at a beat happen without a second of them being waited for.
    clock = VirtualClock()
    clock.run(_keep_and_cancel(f"sqlite:///{tmp_path / 'runs.db'}", clock))


async def _keep_and_cancel(store: str, clock: VirtualClock) -> None:
    started.clear()
    counted = _Counted(stead.store.open_store(store))
    model = ScriptedModel([Reply(tool_calls=[("hold", {"n": 1})]), "done"])
    agent = stead.Agent("kept", model, [hold], limits=stead.Limits(cancel_grace=5))
    async with stead.Runtime(counted, agents=[agent], lease_ttl=30, clock=clock) as owner:  # type: ignore[arg-type]
        rids = [await owner.start(agent, f"go {i}") for i in range(RUNS)]
        driving = [asyncio.ensure_future(owner.run(rid)) for rid in rids]

        async def all_started() -> bool:
            return len(started) == RUNS

        await _until(all_started, "every tool to start")
        counted.calls.clear()
        first = {rid: (await counted.store.get_run(rid)).lease_expires_at for rid in rids}
        held_from = clock()

        async def all_renewed() -> bool:
            now = {rid: (await counted.store.get_run(rid)).lease_expires_at for rid in rids}
            return all((now[r] or 0) > (first[r] or 0) for r in rids)

        await _until(all_renewed, "every lease to be renewed")
        # Renewed a third of the TTL after it was taken, never later.
        assert clock() - held_from <= 10 + owner.watch_interval
        # One read of every run's last sequence and one write of every lease due a beat: a
        # read and a renewal per run and beat was, with a thousand runs in flight on
        # PostgreSQL, thousands of statements a second.
        assert counted.calls["renew"] == counted.calls["get_run"] == 0, counted.calls
        assert counted.calls["renew_leases"] >= 1 and RUNS in counted.covered
        assert len(_keepers()) == 1
        # A minute on, every lease still ours: renewed at every third of the TTL.
        await asyncio.sleep(60)
        for rid in rids:
            record = await counted.store.get_run(rid)
            assert record.lease_owner == owner.owner
            assert (record.lease_expires_at or 0) > clock()
        async with stead.Runtime(store, agents=[agent], clock=clock) as other:
            for rid in rids:
                await other.cancel(rid, "stop")
            asked = clock()
        views = await asyncio.wait_for(asyncio.gather(*driving), timeout=60)
        assert {v.status for v in views} == {RunStatus.CANCELLED}
        # Heard at the keeper's next beat; then the tool, which ignores the signal, has its
        # grace before it is cut off.
        assert clock() - asked <= 2 * owner.watch_interval + 5

        async def keeper_gone() -> bool:
            return not _keepers()

        await _until(keeper_gone, "the keeper to end with its last run")
