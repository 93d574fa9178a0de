"""The execution ledger on both stores (store/ledger/_ledger.py, migration 0004_ledger).

Each test runs on SQLite and PostgreSQL. The ledger's events as stored always fold
(core/ledger.py) to the row's phase: the SQL's conditional writes and the pure table agree.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from _backends import Backend

from stead.core.ledger import fold
from stead.errors import DispatchRejected
from stead.store import Store
from stead.store.ledger._ledger import Ledger, ledger_for

T0 = 1_000.0


def tool_assignment(effect_id: str, effect_class: str = "read_only") -> dict[str, object]:
    policy = {"read_only": "rerun", "idempotent_write": "rerun_with_key"}.get(
        effect_class, "reconcile_or_ask"
    )
    return {
        "kind": "tool",
        "key": {"session_id": "s", "run_id": "r1", "effect_id": effect_id},
        "tool": {
            "tool_name": "t",
            "definition_digest": "d",
            "arguments": "{}",
            "effect_class": effect_class,
            "replay_policy": policy,
            "tool_call_id": "c",
            "turn_index": 0,
            "idempotency_key": "k",
            "attempt": 1,
        },
    }


def key(effect_id: str) -> tuple[str, str, str]:
    return (effect_id, "r1", "s")


@pytest.fixture
async def ledger(store: Store) -> AsyncIterator[Ledger]:
    led = ledger_for(store, poll_interval=0.05)
    yield led
    await led.close()


async def accept(led: Ledger, effect_id: str, effect_class: str = "read_only") -> bool:
    return await led.accept(
        key(effect_id),
        kind="tool",
        queue="q",
        assignment=tool_assignment(effect_id, effect_class),
        now=T0,
    )


async def consistent(led: Ledger, effect_id: str) -> str:
    """The row's phase, after checking the stored events fold to it."""
    row = await led.read(effect_id, now=T0)
    assert row is not None
    state = fold(await led.history(effect_id))
    assert (state.phase, state.epoch, state.position) == (row.phase, row.epoch, row.position)
    return row.phase


async def test_accept_is_idempotent_and_the_tombstone_excludes_it(ledger: Ledger) -> None:
    assert await accept(ledger, "e1") and await accept(ledger, "e1")
    assert not await ledger.abort(key("e1"), now=T0)  # accepted first: abort loses
    assert await ledger.abort(key("e2"), now=T0) and await ledger.abort(key("e2"), now=T0)
    assert not await accept(ledger, "e2")  # aborted first: the acceptance is refused
    assert await consistent(ledger, "e1") == "accepted"
    assert await consistent(ledger, "e2") == "aborted"
    assert [e.kind for e in await ledger.history("e1")] == ["accepted"]


async def test_a_key_accepted_with_one_assignment_refuses_another(ledger: Ledger) -> None:
    """A key names one effect: accepting the same assignment again answers accepted, and
    accepting another one under it is refused (its executor performs what was accepted)."""
    assert await accept(ledger, "e1")
    assert await accept(ledger, "e1")
    other = tool_assignment("e1", "idempotent_write")
    with pytest.raises(DispatchRejected, match="e1: it was accepted with another assignment"):
        await ledger.accept(key("e1"), kind="tool", queue="q", assignment=other, now=T0)
    assert [e.kind for e in await ledger.history("e1")] == ["accepted"]
    await ledger.heartbeat("x", ["q"], ttl=10, now=T0)
    [c] = await ledger.claim("x", ["q"], limit=1, now=T0)
    assert c.assignment == tool_assignment("e1")  # what was accepted first


async def test_racing_accept_and_abort_leave_exactly_one(backend: Backend) -> None:
    """Two stores (two connections) race an accept and an abort of each key: the key's
    primary key lets exactly one of them exist, and each side's answer says which."""
    a, b = ledger_for(backend.open()), ledger_for(backend.open())
    try:
        for i in range(10):
            k = f"race{i}"
            got = await asyncio.gather(accept(a, k), b.abort(key(k), now=T0))
            assert got in ([True, False], [False, True])
            kinds = [e.kind for e in await a.history(k)]
            assert kinds == (["accepted"] if got[0] else ["aborted"])
    finally:
        await a.close()
        await b.close()


async def test_claim_start_settle_under_the_claims_epoch(ledger: Ledger) -> None:
    await accept(ledger, "e1")
    await ledger.heartbeat("x", ["q"], ttl=10, now=T0)
    [c] = await ledger.claim("x", ["q"], limit=5, now=T0)
    assert (c.effect_id, c.epoch, c.restarted) == ("e1", 1, False)
    assert await ledger.claim("x", ["q"], limit=5, now=T0) == []  # held: not offered twice
    assert await ledger.start("e1", epoch=1, now=T0)
    cancelled = {"kind": "cancelled"}
    assert not await ledger.settle("e1", epoch=0, outcome=cancelled, now=T0, executor="x")
    assert not await ledger.settle("e1", epoch=1, outcome=cancelled, now=T0, executor="y")
    assert await ledger.settle(
        "e1", epoch=1, outcome={"kind": "tool_succeeded", "content": "ok"}, now=T0, executor="x"
    )
    assert not await ledger.settle("e1", epoch=1, outcome=cancelled, now=T0, executor="x")
    row = await ledger.read("e1", now=T0)
    assert row is not None and row.outcome == {"kind": "tool_succeeded", "content": "ok"}
    assert await consistent(ledger, "e1") == "settled"
    assert await ledger.acknowledge("e1", now=T0)
    assert await consistent(ledger, "e1") == "acknowledged"


async def test_a_lapsed_lease_is_taken_over_and_the_old_holder_is_fenced(ledger: Ledger) -> None:
    """The zombie case in the store: x claims and starts, its lease lapses, y takes the key
    over (restarted, claimed at a newer epoch); x's settle is refused by the update's own
    condition, y's lands; the history shows one settle."""
    await accept(ledger, "e1", "idempotent_write")
    await ledger.heartbeat("x", ["q"], ttl=10, now=T0)
    [cx] = await ledger.claim("x", ["q"], limit=1, now=T0)
    assert await ledger.start("e1", epoch=cx.epoch, now=T0)
    assert await ledger.claim("y", ["q"], limit=1, now=T0 + 5) == []  # x's lease is live
    row = await ledger.read("e1", now=T0 + 5)
    assert row is not None and row.lease_live
    later = T0 + 11
    row = await ledger.read("e1", now=later)
    assert row is not None and not row.lease_live  # orphaned
    await ledger.heartbeat("y", ["q"], ttl=10, now=later)
    [cy] = await ledger.claim("y", ["q"], limit=1, now=later)
    assert cy.restarted and cy.epoch == cx.epoch + 2
    held, _ = await ledger.heartbeat("x", ["q"], ttl=10, now=later)  # x wakes up
    assert held == set()  # and learns it holds nothing
    assert not await ledger.settle(
        "e1", epoch=cx.epoch, outcome={"kind": "cancelled"}, now=later, executor="x"
    )
    assert await ledger.start("e1", epoch=cy.epoch, now=later)
    assert await ledger.settle(
        "e1",
        epoch=cy.epoch,
        outcome={"kind": "tool_succeeded", "content": "y"},
        now=later,
        executor="y",
    )
    kinds = [e.kind for e in await ledger.history("e1")]
    assert kinds == ["accepted", "claimed", "started", "restarted", "claimed", "started", "settled"]
    assert await consistent(ledger, "e1") == "settled"


async def test_an_orphaned_non_idempotent_call_that_started_settles_unknown(ledger: Ledger) -> None:
    await accept(ledger, "e1", "non_idempotent")
    await accept(ledger, "e2", "non_idempotent")
    await ledger.heartbeat("x", ["q"], ttl=10, now=T0)
    claims = await ledger.claim("x", ["q"], limit=2, now=T0)
    assert await ledger.start("e1", epoch=claims[0].epoch, now=T0)  # e2 never started
    await ledger.heartbeat("y", ["q"], ttl=10, now=T0 + 11)
    again = await ledger.claim("y", ["q"], limit=5, now=T0 + 11)
    assert [c.effect_id for c in again] == ["e2"]  # it never started: safe to run
    row = await ledger.read("e1", now=T0 + 11)
    assert row is not None and row.phase == "settled"
    assert row.outcome is not None and row.outcome["kind"] == "tool_unknown"
    assert await consistent(ledger, "e1") == "settled"


async def test_cancel_settles_an_unheld_key_and_flags_a_held_one(ledger: Ledger) -> None:
    await accept(ledger, "e1")
    row = await ledger.request_cancel("e1", reason="stop", now=T0)
    assert row is not None and row.phase == "settled"
    assert row.outcome == {"kind": "cancelled", "reason": "stop"}
    await accept(ledger, "e2")
    await ledger.heartbeat("x", ["q"], ttl=10, now=T0)
    [c] = await ledger.claim("x", ["q"], limit=1, now=T0)
    row = await ledger.request_cancel("e2", reason="stop", now=T0)
    assert row is not None and row.phase == "claimed" and row.cancel
    assert await ledger.heartbeat("x", ["q"], ttl=10, now=T0) == ({"e2"}, {"e2"})
    assert await ledger.request_cancel("nope", reason="stop", now=T0) is None
    for k in ("e1", "e2"):
        await consistent(ledger, k)
    assert c.epoch == 1


async def test_release_gives_back_only_what_never_started(ledger: Ledger) -> None:
    await accept(ledger, "e1")
    await ledger.heartbeat("x", ["q"], ttl=10, now=T0)
    [c] = await ledger.claim("x", ["q"], limit=1, now=T0)
    assert await ledger.release("e1", executor="x", epoch=c.epoch, reason="stop", now=T0)
    [c2] = await ledger.claim("x", ["q"], limit=1, now=T0)
    assert c2.epoch == c.epoch + 2
    assert await ledger.start("e1", epoch=c2.epoch, now=T0)
    assert not await ledger.release("e1", executor="x", epoch=c2.epoch, reason="stop", now=T0)
    assert await consistent(ledger, "e1") == "started"


async def test_serves_reads_live_executor_leases(ledger: Ledger) -> None:
    assert not await ledger.serves("gpu", now=T0)
    await ledger.heartbeat("x", ["gpu", "io"], ttl=10, now=T0)
    assert await ledger.serves("gpu", now=T0) and await ledger.serves("io", now=T0)
    assert not await ledger.serves("gp", now=T0)
    assert not await ledger.serves("gpu", now=T0 + 11)
    await ledger.retire("x")
    assert not await ledger.serves("gpu", now=T0)


async def test_a_waiter_sees_a_settle_by_another_connection(backend: Backend) -> None:
    """Notice (PostgreSQL) or poll (SQLite): the waiter wakes for the settle and returns its
    position. The claim and the start before it wake nobody (the owner would read for
    nothing)."""
    owner = ledger_for(backend.open(poll_interval=0.05), poll_interval=0.05)
    executor = ledger_for(backend.open())
    try:
        await accept(owner, "e1")
        waiting = asyncio.ensure_future(owner.wait_settled("e1", "r1", 30))
        await asyncio.sleep(0.1)
        await executor.heartbeat("x", ["q"], ttl=10, now=T0)
        [c] = await executor.claim("x", ["q"], limit=1, now=T0)
        assert await executor.start("e1", epoch=c.epoch, now=T0)
        await asyncio.sleep(0.2)  # four polls of the owner's watcher
        assert not waiting.done()
        await executor.settle(
            "e1", epoch=c.epoch, outcome={"kind": "cancelled"}, now=T0, executor="x"
        )
        assert await asyncio.wait_for(waiting, 20) == 4
    finally:
        await owner.close()
        await executor.close()


async def test_a_queue_limit_holds_across_executors(backend: Backend) -> None:
    """Limit 2: three executors (three connections) claiming at once take 2 keys between
    them; a settle frees a slot; a held key whose executor's lease lapsed does not count."""
    from stead.store.ledger import _limits

    leds = [ledger_for(backend.open()) for _ in range(3)]
    try:
        await _limits.set_limit(leds[0], "q", 2)
        for i in range(6):
            await accept(leds[0], f"e{i}")
        for i, led in enumerate(leds):
            await led.heartbeat(f"x{i}", ["q"], ttl=10, now=T0)
        got = await asyncio.gather(
            *(led.claim(f"x{i}", ["q"], limit=4, now=T0) for i, led in enumerate(leds))
        )
        claimed = [c for cs in got for c in cs]
        assert len(claimed) == 2
        first = claimed[0]
        holder = next(f"x{i}" for i, cs in enumerate(got) if first in cs)
        await leds[0].settle(
            first.effect_id,
            epoch=first.epoch,
            outcome={"kind": "cancelled"},
            now=T0,
            executor=holder,
        )
        assert len(await leds[1].claim("x1", ["q"], limit=4, now=T0)) == 1
        assert await leds[2].claim("x2", ["q"], limit=4, now=T0) == []
        # Every holder's lease lapses: nothing counts, the orphans and the rest are claimable.
        await leds[2].heartbeat("x3", ["q"], ttl=10, now=T0 + 11)
        assert len(await leds[2].claim("x3", ["q"], limit=4, now=T0 + 11)) == 2
    finally:
        for led in leds:
            await led.close()


async def test_a_paused_queue_is_not_claimed_until_the_pause_ends(ledger: Ledger) -> None:
    from stead.store.ledger import _limits

    await accept(ledger, "e1")
    await _limits.pause(ledger, "q", T0 + 5)
    await _limits.pause(ledger, "q", T0 + 2)  # an earlier pause does not shorten it
    await ledger.heartbeat("x", ["q"], ttl=100, now=T0)
    assert await ledger.claim("x", ["q"], limit=1, now=T0 + 4) == []
    assert len(await ledger.claim("x", ["q"], limit=1, now=T0 + 5.5)) == 1


async def test_a_racing_stale_settle_and_takeover_never_both_land(backend: Backend) -> None:
    """The holder's lease has lapsed; it settles at the very moment another executor takes
    the key over (two connections, concurrently, 20 keys). Each time exactly one of the two
    wins, and the stored history always folds: the fence is in the write itself."""
    zombie, other = ledger_for(backend.open()), ledger_for(backend.open())
    try:
        for i in range(20):
            k = f"z{i}"
            await accept(zombie, k)
            await zombie.heartbeat("z", ["q"], ttl=10, now=T0)
            [c] = await zombie.claim("z", ["q"], limit=1, now=T0)
            await zombie.start(k, epoch=c.epoch, now=T0)
            await other.heartbeat("o", ["q"], ttl=10, now=T0 + 11)
            settled, took = await asyncio.gather(
                zombie.settle(
                    k, epoch=c.epoch, outcome={"kind": "cancelled"}, now=T0 + 11, executor="z"
                ),
                other.claim("o", ["q"], limit=1, now=T0 + 11),
            )
            assert settled != bool(took), (k, settled, took)
            kinds = [e.kind for e in await other.history(k)]
            assert kinds.count("settled") == int(settled)
            await consistent(other, k)
    finally:
        await zombie.close()
        await other.close()
