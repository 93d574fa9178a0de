"""Retention on SQLite and PostgreSQL: a prune with every kind of row present deletes every
row of the runs that go and nothing of the runs that stay (their export is byte-identical
before and after); a run waiting on a person, a run a kept conversation run reads its history
from, and the source of a kept fork stay; SQLite gives the space back; the text a process
killed mid-stream shared for watchers goes once its lease lapsed, a live stream's stays."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shared_progress_child import CHUNKS

import stead
from _spawn import python_popen
from _wait import until
from stead.core.retention import DAY, Retention
from stead.store.lifecycle import q, sql_store
from stead.testing import Reply, ScriptedModel, assert_valid_history

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00"
    b"\x00\x00\x00IEND\xaeB`\x82"
)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'r.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@stead.tool(effect="read_only")
def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped", "note": "x" * 600}


@stead.tool(effect="non_idempotent", requires_approval=lambda a: True)
def refund(order_id: int) -> str:
    """Refund an order."""
    return "refunded"


def tool_run(n: int = 3) -> list[Reply]:
    return [Reply(tool_calls=[("lookup", {"order_id": i})]) for i in range(n)] + [
        Reply(text="done")
    ]


TABLES = {
    "runs": "SELECT COUNT(*) FROM runs WHERE run_id = ?",
    "events": "SELECT COUNT(*) FROM events e JOIN runs r ON r.run_no = e.run_no WHERE r.run_id = ?",
    "snapshots": "SELECT COUNT(*) FROM snapshots WHERE run_id = ?",
    "ledger_keys": "SELECT COUNT(*) FROM ledger_keys WHERE run_id = ?",
    "ledger_events": "SELECT COUNT(*) FROM ledger_events WHERE effect_id = 'eff-' || ?",
    "ledger_progress": "SELECT COUNT(*) FROM ledger_progress WHERE effect_id = 'eff-' || ?",
    "shared_progress": "SELECT COUNT(*) FROM ledger_progress WHERE effect_id = 'run:' || ? || ':0'",
    "conversation_messages": "SELECT COUNT(*) FROM conversation_messages WHERE run_id = ?",
    "run_links": "SELECT COUNT(*) FROM run_links WHERE run_id = ?",
}


async def rows_of(rt: stead.Runtime, run_id: str) -> dict[str, int]:
    s = sql_store(rt.store)
    out = {}
    async with s._reading() as db:
        for table, sql in TABLES.items():
            row = await db.one(q(s, sql), (run_id,))
            out[table] = int(row[0]) if row else 0
    return out


async def count(rt: stead.Runtime, sql: str) -> int:
    s = sql_store(rt.store)
    async with s._reading() as db:
        row = await db.one(sql)
    return int(row[0]) if row else 0


async def ledger_rows(rt: stead.Runtime, run_id: str, now: float) -> None:
    """Execution-ledger rows of the run, as an executor pool would leave them."""
    s = sql_store(rt.store)
    from stead.store.lifecycle import atomic

    async with atomic(s) as db:
        await db.run(
            q(
                s,
                "INSERT INTO ledger_keys (effect_id, run_id, origin, kind, phase, position, "
                "outcome, created_at, updated_at) VALUES ('eff-' || ?, ?, 'accepted', 'tool', "
                "'settled', 2, '{}', ?, ?)",
            ),
            (run_id, run_id, now, now),
        )
        await db.run(
            q(s, "INSERT INTO ledger_events VALUES ('eff-' || ?, 1, 'accepted', '{}', ?)"),
            (run_id, now),
        )
        await db.run(
            q(s, "INSERT INTO ledger_progress VALUES ('eff-' || ?, 1, 'par', ?)"), (run_id, now)
        )


async def shared_rows(rt: stead.Runtime, run_id: str, now: float) -> None:
    """Text a process shared for watchers of the run's first turn and never deleted (it was
    killed mid-stream; ``Runtime(share_progress=True)``)."""
    s = sql_store(rt.store)
    from stead.store.lifecycle import atomic

    async with atomic(s) as db:
        await db.run(
            q(s, "INSERT INTO ledger_progress VALUES ('run:' || ? || ':0', 0, 'The ', ?)"),
            (run_id, now),
        )


async def export_of(rt: stead.Runtime, run_ids: list[str]) -> str:
    out = io.StringIO()
    await rt.export(out, run_ids=run_ids)
    return out.getvalue()


async def test_prune_deletes_every_row_of_what_goes_and_nothing_of_what_stays(
    url: str,
) -> None:
    now = [1_000_000.0]
    # A scripted model answers by how many replies the request holds: one script per role.
    agent = stead.Agent("support", ScriptedModel(tool_run()), [lookup])
    approver = stead.Agent(
        "approver", ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 1})])]), [refund]
    )
    chat = stead.Agent("chat", ScriptedModel([Reply(text="hi")] * 8), [])
    agents = [agent, approver, chat]
    async with stead.Runtime(url, agents=agents, clock=lambda: now[0], snapshot_every=3) as rt:
        old = (await rt.run(await rt.start(agent, "old"))).run_id
        waiting = (await rt.run(await rt.start(approver, "refund"))).run_id
        assert (await rt.get(waiting)).status.value == "awaiting_approval"
        gone_chat = [
            (await rt.send("c-gone", "look", agent=chat, attachments=[stead.Image(PNG)])).run_id,
            (await rt.send("c-gone", "again")).run_id,
        ]
        kept_chat = [(await rt.send("c-kept", "first", agent=chat)).run_id]
        source = (await rt.run(await rt.start(agent, "source"))).run_id
        for rid in (old, source, *gone_chat):
            await ledger_rows(rt, rid, now[0])
        for rid in (old, *gone_chat):
            await shared_rows(rt, rid, now[0])
        now[0] += 40 * DAY
        recent = (await rt.run(await rt.start(agent, "recent"))).run_id
        kept_chat.append((await rt.send("c-kept", "later")).run_id)
        fork = (await rt.fork(source, at_turn=0, input="try again")).run_id
        await rt.run(fork)
        await ledger_rows(rt, recent, now[0])

        kept = [waiting, recent, *kept_chat, source, fork]
        goes = [old, *gone_chat]
        before = {rid: await rows_of(rt, rid) for rid in kept + goes}
        assert all(
            before[old][t] > 0 for t in TABLES if t not in ("conversation_messages", "run_links")
        )
        assert before[gone_chat[0]]["conversation_messages"] == 1
        assert before[fork]["run_links"] == 1
        assert await count(rt, "SELECT COUNT(*) FROM blobs") == 1
        kept_export = await export_of(rt, kept)

        policy = Retention(keep={"completed": 30 * DAY, "failed": 30 * DAY})
        dry = await rt.prune(policy)
        assert sorted(r for r, _ in dry.runs) == sorted(goes) and not dry.applied
        assert dry.bytes > 0
        assert {rid: await rows_of(rt, rid) for rid in kept + goes} == before  # dry: untouched

        done = await rt.prune(policy, apply=True, batch=1)
        assert sorted(r for r, _ in done.runs) == sorted(goes)
        assert done.blobs == 1  # the image no run left refers to
        for rid in goes:
            assert set((await rows_of(rt, rid)).values()) == {0}, rid
        for rid in kept:
            assert await rows_of(rt, rid) == before[rid], rid
        assert await export_of(rt, kept) == kept_export
        assert await count(rt, "SELECT COUNT(*) FROM blobs") == 0
        # the kept runs still read whole: the later conversation run sees the earlier one
        later = await rt.get(kept_chat[1])
        assert [m.content for m in later.messages if m.role == "user"] == ["first", "later"]
        assert (await rt.prune(policy)).runs == []


async def test_sqlite_gives_the_space_back(tmp_path: Path) -> None:
    now = [1_000_000.0]
    agent = stead.Agent("support", ScriptedModel(tool_run(3) * 40), [lookup])
    path = tmp_path / "space.db"
    async with stead.Runtime(f"sqlite:///{path}", agents=[agent], clock=lambda: now[0]) as rt:
        for _ in range(40):
            await rt.run(await rt.start(agent, "x" * 2000))
        now[0] += 31 * DAY
        policy = Retention(keep={"completed": 30 * DAY})
        checkpoint = "PRAGMA wal_checkpoint(TRUNCATE)"
        s = sql_store(rt.store)
        async with s._writing_one() as db:
            await db.run(checkpoint)
        full = path.stat().st_size
        done = await rt.prune(policy, apply=True)
        assert len(done.runs) == 40
        async with s._reading() as db:
            free = (await db.one("PRAGMA freelist_count"))[0]
        assert free > 0  # the pages are free for new rows at once
        await rt.prune(policy, apply=True, vacuum_after=True)
        async with s._writing_one() as db:
            await db.run(checkpoint)
        assert path.stat().st_size < full / 2  # what is left is the empty schema


def test_a_crash_during_a_prune_batch_loses_no_run_by_halves(tmp_path: Path) -> None:
    import subprocess
    import sys

    from _crash_harness import KILLED, finish

    url = f"sqlite:///{tmp_path / 'p.db'}"
    then = 1_000_000.0
    agent = stead.Agent("support", ScriptedModel(tool_run(2)), [lookup])

    async def make() -> list[str]:
        async with stead.Runtime(url, agents=[agent], clock=lambda: then) as rt:
            return [(await rt.run(await rt.start(agent, f"r{i}"))).run_id for i in range(6)]

    runs = asyncio.run(make())

    async def state() -> dict[str, dict[str, int]]:
        async with stead.Runtime(url, agents=[agent]) as rt:
            return {rid: await rows_of(rt, rid) for rid in runs}

    before = asyncio.run(state())

    def prune(crash: str | None) -> Any:
        env = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
        if crash:
            env["STEAD_CRASH_AT"] = crash
        child = Path(__file__).parent / "lifecycle_child.py"
        p = subprocess.Popen(
            [sys.executable, str(child), url, "prune", str(DAY), str(then + 2 * DAY)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = p.communicate(timeout=60)
        return finish(p, out, err)

    # Batches of 2: killed inside the second batch's transaction, after its first delete.
    killed = prune("during_prune_batch#3")
    assert killed.returncode == KILLED, killed.stderr
    after = asyncio.run(state())
    gone = [rid for rid in runs if set(after[rid].values()) == {0}]
    whole = [rid for rid in runs if after[rid] == before[rid]]
    assert len(gone) == 2 and len(whole) == 4 and set(gone) | set(whole) == set(runs)

    done = prune(None)
    assert done.returncode == 0, done.stderr
    assert sorted(done.out["pruned"]) == sorted(whole)
    assert all(set(v.values()) == {0} for v in asyncio.run(state()).values())


async def test_a_worker_prunes_in_the_background_while_runs_are_in_flight(url: str) -> None:
    import asyncio
    import time

    from _wait import until_async
    from stead.runtime import Worker

    old_clock = time.time() - 2 * 3600
    agent = stead.Agent("support", ScriptedModel(tool_run(3)), [lookup])
    approver = stead.Agent(
        "approver", ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 1})])]), [refund]
    )
    async with stead.Runtime(url, agents=[agent, approver], clock=lambda: old_clock) as rt:
        old = [(await rt.run(await rt.start(agent, f"old {i}"))).run_id for i in range(30)]
        waiting = (await rt.run(await rt.start(approver, "refund"))).run_id
    policy = Retention(keep={"completed": 3600}, batch=4, interval=0.05)
    worker = Worker(url, [agent, approver], concurrency=8, poll_interval=0.05, retention=policy)
    async with stead.Runtime(url, agents=[agent, approver]) as rt:
        fresh = [await rt.start(agent, f"new {i}") for i in range(24)]
        serving = asyncio.ensure_future(worker.run())
        try:

            async def settled() -> bool:
                left = {r.run_id: r for r in await rt.list_runs(limit=1000)}
                return (
                    not any(rid in left for rid in old)
                    and all(left[rid].status == "completed" for rid in fresh)
                    and all(left[rid].lease_owner is None for rid in fresh)
                )

            await until_async(settled, "the old runs pruned and the new ones completed")
        finally:
            worker.stop()
            await serving
            await worker.close()
        assert worker.pruner is not None and worker.pruner.pruned == 30
        for rid in fresh:  # every run in flight finished whole: every call ran once
            view = await rt.get(rid)
            assert view.output == "done"
            assert_valid_history(await rt.state(rid))
            assert (
                sum(1 for e in await rt.events(rid) if e.event.kind == "tool_call_requested") == 3
            )
        assert (await rt.get(waiting)).status.value == "awaiting_approval"


async def test_a_cap_pages_past_the_runs_it_keeps_for_their_dependents(url: str) -> None:
    """max_runs=2, two runs a transaction: the newest runs over the cap are sources of
    forks (kept), and every older one over the cap still goes in the same prune."""
    agent = stead.Agent("capped", ScriptedModel([Reply(text="done")] * 20), [])
    async with stead.Runtime(url, agents=[agent]) as rt:
        made = [(await rt.run(await rt.start(agent, f"n{i}"))).run_id for i in range(8)]
        for source in made[4:6]:  # the two newest over the cap: a queued fork each
            await rt.fork(source, at_turn=0, input="again")
        policy = Retention(max_runs=2, batch=2)
        seen = await rt.prune(policy)
        assert sorted(rid for rid, _ in seen.runs) == sorted(made[:4])
        why = dict(seen.runs)
        assert why[made[0]] == "7 newer finished runs of capped, kept 2"
        assert why[made[3]] == "4 newer finished runs of capped, kept 2"
        done = await rt.prune(policy, apply=True)
        assert sorted(rid for rid, _ in done.runs) == sorted(made[:4])
        left = {r.run_id for r in await rt.list_runs(limit=100)}
        assert set(made[4:]) <= left and not set(made[:4]) & left
        assert (await rt.prune(policy)).runs == []


# -- streamed text a process shared and left behind ------------------------------------------
#
# A process that shares its streamed text for watchers (``Runtime(share_progress=True)``)
# and is SIGKILLed mid-stream leaves its turn's text in the store (it would have deleted it
# at its next turn or its close); a prune deletes it once the dead process's lease on the run
# has lapsed, and keeps the text of a stream whose writer still holds its run. Times are the
# pruning Runtime's clock, set from the leases in the store.

STREAMER = Path(__file__).with_name("shared_progress_child.py")
WHOLE = "".join(CHUNKS)


def read(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """One read of the store from outside any Runtime (``?`` placeholders)."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(sql, params).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql.replace("?", "%s").encode(), params).fetchall()


def shared_text(url: str, run_id: str) -> str:
    """The text shared for ``run_id``'s first turn, as a watcher reads it."""
    rows = read(url, "SELECT text FROM ledger_progress WHERE effect_id = ? AND seq >= 0 "
                "ORDER BY seq", f"run:{run_id}:0")  # fmt: skip
    return "".join(str(r[0]) for r in rows)


def lease_lapses(url: str, run_id: str) -> float:
    rows = read(url, "SELECT lease_expires_at FROM runs WHERE run_id = ?", run_id)
    return float(rows[0][0]) if rows and rows[0][0] is not None else 0.0


async def test_a_killed_streams_text_is_pruned_once_its_lease_lapsed_and_a_live_ones_kept(
    url: str,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_CRASH")}
    children = {rid: python_popen(STREAMER, url, rid, env=env) for rid in ("run_dead", "run_live")}
    now = [0.0]
    try:
        async with stead.Runtime(url, clock=lambda: now[0]) as rt:
            for rid in children:  # both processes are mid-stream, their text shared
                await asyncio.to_thread(
                    until, lambda r=rid: shared_text(url, r) == WHOLE, f"{rid}'s text shared"
                )
            dead = children["run_dead"]
            dead.send_signal(signal.SIGKILL)
            await asyncio.to_thread(dead.wait, 30)
            lapses = lease_lapses(url, "run_dead")
            assert lapses > 0  # the dead process still holds the run, on paper

            # Until its lease lapses, the store cannot tell the dead writer from a live one.
            now[0] = lapses - 1
            pruned = await rt.prune(Retention(), apply=True)
            assert (pruned.streams, pruned.runs) == (0, [])
            assert shared_text(url, "run_dead") == WHOLE

            # Once it has, the dead writer's text goes. The live writer's keeper renews its
            # lease past that time, and its text stays.
            now[0] = lapses + 1
            await asyncio.to_thread(
                until, lambda: lease_lapses(url, "run_live") > now[0], "the live lease renewed"
            )
            pruned = await rt.prune(Retention(), apply=True)
            assert (pruned.streams, pruned.runs) == (1, [])
            assert shared_text(url, "run_dead") == ""
            assert shared_text(url, "run_live") == WHOLE
            assert (await rt.get("run_dead")).status.value == "running"  # the run stays
    finally:
        for child in children.values():
            child.send_signal(signal.SIGKILL)
            child.wait(30)


def test_stead_runs_prune_counts_a_killed_streams_text_then_deletes_it(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``stead runs prune`` says how many turns' shared text no live writer is behind, in
    text and JSON: a dry run counts the killed writer's and deletes nothing, ``--apply``
    deletes it. The CLI reads the wall clock: the dead writer's short lease is left to lapse."""
    from stead.cli import main

    async def create() -> None:  # the store's tables, before the child and this test read them
        async with stead.Runtime(url):
            pass

    asyncio.run(create())
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_CRASH")}
    child = python_popen(STREAMER, url, "run_dead", env=env)
    try:
        until(lambda: shared_text(url, "run_dead") == WHOLE, "the text shared")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    until(lambda: 0 < lease_lapses(url, "run_dead") < time.time(), "the dead writer's lease lapsed")
    prune = ["--store", url, "runs", "prune", "--keep", "completed=30d"]

    assert main(prune) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "would prune 0 runs" in out and "no live writer is behind: 1 (a dry run" in out, out
    assert main([*prune, "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert (said["applied"], said["streams"], said["runs"]) == (False, 1, [])
    assert shared_text(url, "run_dead") == WHOLE  # a dry run deletes nothing

    assert main([*prune, "--apply", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert (said["applied"], said["streams"], said["runs"]) == (True, 1, [])
    assert shared_text(url, "run_dead") == ""
    assert main([*prune, "--apply"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "pruned 0 runs" in out and "no live writer is behind: 0" in out, out
