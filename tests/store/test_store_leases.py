"""Leases and fencing (Guarantee 5): a worker that lost its lease cannot write."""

from __future__ import annotations

import pytest
from _backends import Backend
from _builders import T0, RunBuilder, created, final_turn, seeded

from stead.errors import Conflict, Fenced, LeaseHeld, RunNotFound, StoreError
from stead.store import Store

pytestmark = pytest.mark.timeout(30)

TTL = 30.0


async def test_claim_takes_the_lease_and_bumps_the_epoch(store: Store) -> None:
    await store.create_run(created("run-1"), now=T0)
    assert await store.claim("run-1", owner="a", now=T0, ttl=TTL) == 1
    rec = await store.get_run("run-1")
    assert (rec.epoch, rec.lease_owner, rec.lease_expires_at) == (1, "a", T0 + TTL)
    # the holder may claim again (a restart with the same identity); the epoch still moves
    assert await store.claim("run-1", owner="a", now=T0 + 1, ttl=TTL) == 2
    assert (await store.get_run("run-1")).lease_expires_at == T0 + 1 + TTL


async def test_a_live_lease_of_another_owner_is_held(store: Store) -> None:
    await store.create_run(created("run-1"), now=T0)
    await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    with pytest.raises(LeaseHeld, match="run-1") as caught:
        await store.claim("run-1", owner="b", now=T0 + TTL - 1, ttl=TTL)
    assert "a" in str(caught.value)
    assert isinstance(caught.value, Conflict)
    rec = await store.get_run("run-1")
    assert (rec.epoch, rec.lease_owner, rec.lease_expires_at) == (1, "a", T0 + TTL)


async def test_claim_after_expiry_takes_over(store: Store) -> None:
    await store.create_run(created("run-1"), now=T0)
    await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    assert await store.claim("run-1", owner="b", now=T0 + TTL + 1, ttl=TTL) == 2
    rec = await store.get_run("run-1")
    assert (rec.epoch, rec.lease_owner) == (2, "b")


async def test_takeover_from_the_named_owner_skips_the_wait(store: Store) -> None:
    await store.create_run(created("run-1"), now=T0)
    await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    with pytest.raises(LeaseHeld):  # proof about someone else is no proof about "a"
        await store.claim("run-1", owner="b", now=T0 + 1, ttl=TTL, takeover_from="c")
    assert await store.claim("run-1", owner="b", now=T0 + 1, ttl=TTL, takeover_from="a") == 2
    assert (await store.get_run("run-1")).lease_owner == "b"


async def test_append_with_an_old_epoch_is_fenced_and_writes_nothing(store: Store) -> None:
    b = await seeded(store, "run-1")
    old = await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    new = await store.claim("run-1", owner="b", now=T0 + TTL + 1, ttl=TTL)
    assert new > old
    before_rec = await store.get_run("run-1")
    before_log = await store.read_events("run-1")
    late = final_turn(b.next_turn)

    for stale in (old, 0, new + 1):
        with pytest.raises(Fenced, match="run-1"):
            await store.append(
                "run-1",
                late,
                expected_seq=b.written,
                epoch=stale,
                status="completed",
                now=T0 + 99,
                snapshot=(b.written + len(late), {"v": 1}),
            )
    assert await store.get_run("run-1") == before_rec
    assert await store.read_events("run-1") == before_log
    assert (await store.load("run-1")).snapshot is None

    assert await store.append(
        "run-1", late, expected_seq=b.written, epoch=new, status="completed", now=T0 + 99
    ) == b.written + len(late)


async def test_renew_extends_our_lease_and_fences_a_stale_one(store: Store) -> None:
    await store.create_run(created("run-1"), now=T0)
    old = await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    await store.renew("run-1", owner="a", epoch=old, now=T0 + 10, ttl=TTL)
    assert (await store.get_run("run-1")).lease_expires_at == T0 + 10 + TTL

    new = await store.claim("run-1", owner="b", now=T0 + 10 + TTL + 1, ttl=TTL)
    with pytest.raises(Fenced, match="run-1"):
        await store.renew("run-1", owner="a", epoch=old, now=T0 + 100, ttl=TTL)
    with pytest.raises(Fenced):  # the right epoch under someone else's name is not ours
        await store.renew("run-1", owner="a", epoch=new, now=T0 + 100, ttl=TTL)
    rec = await store.get_run("run-1")
    assert (rec.epoch, rec.lease_owner, rec.lease_expires_at) == (new, "b", T0 + 10 + 2 * TTL + 1)


async def test_release_drops_only_our_own_lease(store: Store) -> None:
    await store.create_run(created("run-1"), now=T0)
    old = await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    new = await store.claim("run-1", owner="b", now=T0 + TTL + 1, ttl=TTL)
    held = await store.get_run("run-1")

    await store.release("run-1", owner="a", epoch=old)  # a lost it long ago: no-op
    await store.release("run-1", owner="a", epoch=new)  # not a's lease: no-op
    await store.release("run-1", owner="b", epoch=old)  # b at an old epoch: no-op
    assert await store.get_run("run-1") == held

    await store.release("run-1", owner="b", epoch=new)
    rec = await store.get_run("run-1")
    assert (rec.lease_owner, rec.lease_expires_at, rec.epoch) == (None, None, new)
    with pytest.raises(Fenced):  # a released lease cannot be renewed
        await store.renew("run-1", owner="b", epoch=new, now=T0 + TTL + 2, ttl=TTL)
    # released before it lapsed: anyone may claim at once
    assert await store.claim("run-1", owner="c", now=T0 + TTL + 2, ttl=TTL) == new + 1


async def test_a_fenced_writer_cannot_sneak_in_after_release(store: Store) -> None:
    """Epochs never go back: a release does not make an old epoch valid again."""
    b = RunBuilder("run-1")
    await b.create(store)
    old = await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    new = await store.claim("run-1", owner="b", now=T0 + TTL + 1, ttl=TTL)
    await store.release("run-1", owner="b", epoch=new)
    b.start(owner="a", epoch=old)
    with pytest.raises(Fenced):
        await b.flush(store, epoch=old)
    assert (await store.get_run("run-1")).last_seq == 1


async def test_lease_calls_on_a_missing_run(store: Store) -> None:
    with pytest.raises(RunNotFound):
        await store.claim("nope", owner="a", now=T0, ttl=TTL)
    with pytest.raises(RunNotFound):
        await store.renew("nope", owner="a", epoch=1, now=T0, ttl=TTL)
    await store.release("nope", owner="a", epoch=1)  # nothing to release, no error


async def test_renew_leases_renews_ours_in_one_call_and_names_the_lost(store: Store) -> None:
    """A worker renews every lease it holds in one write: each run's fencing is
    its own, so a run taken over is named as lost and the others are renewed."""
    epochs = {}
    for rid in ("run-1", "run-2", "run-3"):
        await store.create_run(created(rid), now=T0)
        epochs[rid] = await store.claim(rid, owner="a", now=T0, ttl=TTL)
    taken = await store.claim("run-2", owner="b", now=T0 + TTL + 1, ttl=TTL)
    leases = [(rid, epochs[rid]) for rid in ("run-1", "run-2", "run-3")] + [("nope", 1)]
    lost = await store.renew_leases(leases, owner="a", now=T0 + TTL, ttl=TTL)
    assert lost == ["run-2", "nope"]
    for rid in ("run-1", "run-3"):
        rec = await store.get_run(rid)
        assert (rec.lease_owner, rec.epoch, rec.lease_expires_at) == ("a", 1, T0 + 2 * TTL)
    rec = await store.get_run("run-2")
    assert (rec.lease_owner, rec.epoch, rec.lease_expires_at) == ("b", taken, T0 + 2 * TTL + 1)
    # the right epoch under another owner's name is not ours either
    assert await store.renew_leases([("run-2", taken)], owner="a", now=T0, ttl=TTL) == ["run-2"]
    assert await store.renew_leases([], owner="a", now=T0, ttl=TTL) == []


async def test_renew_leases_when_every_lease_holds_renews_all_and_names_none(
    store: Store,
) -> None:
    """The usual round, every lease still ours: nothing named lost, every expiry moved (on
    SQLite the path that runs the renewals in one ``executemany`` and trusts its count)."""
    epochs = {}
    for rid in ("run-1", "run-2", "run-3"):
        await store.create_run(created(rid), now=T0)
        epochs[rid] = await store.claim(rid, owner="a", now=T0, ttl=TTL)
    leases = [(rid, epochs[rid]) for rid in ("run-1", "run-2", "run-3")]
    assert await store.renew_leases(leases, owner="a", now=T0 + 5, ttl=TTL) == []
    for rid in ("run-1", "run-2", "run-3"):
        rec = await store.get_run(rid)
        assert (rec.lease_owner, rec.epoch, rec.lease_expires_at) == ("a", 1, T0 + 5 + TTL)


async def test_last_seqs_reads_many_runs_at_once(store: Store) -> None:
    await seeded(store, "run-1")
    await store.create_run(created("run-2"), now=T0)
    want = {"run-1": (await store.get_run("run-1")).last_seq, "run-2": 1}
    assert await store.last_seqs(["run-1", "nope", "run-2"]) == want
    assert await store.last_seqs([]) == {}


async def test_a_renewal_waits_for_a_lock_no_longer_than_the_bound(backend: Backend) -> None:
    """``bound_waits``: a renewal that finds the run locked by another connection (another
    process's transaction) fails with ``StoreError`` once the bound passes, although the
    store was opened to wait a minute (the test's timeout is shorter), and succeeds once the
    lock is gone."""
    long = {"busy_timeout": 60.0} if backend.name == "sqlite" else {"lock_timeout": 60.0}
    store = backend.open(**long)
    store.bound_waits(0.2)
    await store.create_run(created("run-1"), now=T0)
    epoch = await store.claim("run-1", owner="a", now=T0, ttl=TTL)
    other = backend.connect()
    try:
        if backend.name == "sqlite":
            other.execute("BEGIN IMMEDIATE")
        else:
            other.execute("SELECT 1 FROM runs WHERE run_id = 'run-1' FOR UPDATE")
        with pytest.raises(StoreError):
            await store.renew_leases([("run-1", epoch)], owner="a", now=T0 + 1, ttl=TTL)
    finally:
        other.rollback()
        other.close()
    assert await store.renew_leases([("run-1", epoch)], owner="a", now=T0 + 2, ttl=TTL) == []
    assert (await store.get_run("run-1")).lease_expires_at == T0 + 2 + TTL
