"""Executor pools with real processes, on both stores: SIGKILL, SIGSTOP, a killed LISTEN.

The run's owner is this test process (a ``Runtime`` whose agent routes its tools to queue
``pool``); the executors are ``pool_child.py`` processes (``Pool``, what ``stead executor``
runs) that the tests kill at each step of performing an effect. Side effects go to an
``SideEffects`` with the pid that performed them, so what really happened is known after a
SIGKILL. After each crash a second executor finishes the effect and the run completes; a
non_idempotent call never runs twice.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _pool_scenario import QUEUE, agent

import stead
from _wait import until_async
from stead.core.effects import Assignment, AssignmentKey, ToolBody, ToolSucceeded
from stead.runtime.executors._store_executor import StoreExecutor
from stead.store import open_store
from stead.store.ledger._ledger import Ledger, ledger_for
from stead.testing import SideEffects

CHILD = Path(__file__).parent / "pool_child.py"
TTL = 1.0
"""Executor lease of the children: short, so a dead one's effects are orphaned quickly."""


class Executors:
    """``pool_child.py`` processes on one store; all killed at teardown."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(self, ttl: float = TTL, **env: str) -> subprocess.Popen[str]:
        p = subprocess.Popen(
            [sys.executable, str(CHILD), self.url, str(ttl)],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(p)
        return p

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                with _quiet():
                    os.kill(p.pid, signal.SIGCONT)
                p.kill()
            p.communicate(timeout=30)


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is ProcessLookupError


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STEAD_TEST_EFFECTS", str(tmp_path / "effects.db"))
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def executors(url: str) -> Iterator[Executors]:
    ex = Executors(url)
    try:
        yield ex
    finally:
        ex.kill_all()


@pytest.fixture
async def ledger(url: str) -> AsyncIterator[Ledger]:
    store = open_store(url)
    led = ledger_for(store)
    try:
        yield led
    finally:
        await led.close()
        await store.close()


async def served(led: Ledger) -> None:
    await until_async(lambda: led.serves(QUEUE, now=time.time()), "an executor serving", timeout=30)


async def died(p: subprocess.Popen[str]) -> None:
    async def gone() -> bool:
        return p.poll() is not None

    await until_async(gone, "the executor gone", timeout=30)
    assert p.returncode == -signal.SIGKILL, p.communicate()[1]


async def history(led: Ledger, run_id: str) -> list[str]:
    [effect_id] = await led.keys(run_id)
    return [e.kind for e in await led.history(effect_id)]


async def drive(url: str, tool: str, run_id: str) -> tuple[stead.RunView, list[str]]:
    """Start and drive the run in this process; (its view, the tool results it recorded)."""
    a = agent(tool)
    async with stead.Runtime(url, agents=[a]) as rt:
        await rt.start(a, "go", run_id=run_id)
        view = await rt.run(run_id)
        events = await rt.events(run_id)
    return view, [e.event.content for e in events if e.event.kind == "tool_result_recorded"]  # type: ignore[attr-defined]


def pids(name: str) -> list[int]:
    return [e["pid"] for e in SideEffects(os.environ["STEAD_TEST_EFFECTS"]).entries(name)]


@pytest.mark.parametrize("point", ["after_claim", "after_start"])
async def test_executor_killed_before_the_effect_another_runs_it_once(
    url: str, executors: Executors, ledger: Ledger, point: str
) -> None:
    """SIGKILL right after the claim (or after ``started`` was written, before the tool's
    body): nothing happened. The owner keeps waiting; a second executor takes the orphaned
    key over once the first's lease lapses. A non_idempotent call that never started is
    run, once; one that started is settled unknown instead (never a second time)."""
    first = executors.spawn(POOL_CRASH_AT=point)
    await served(ledger)
    owner = asyncio.ensure_future(drive(url, "charge", f"run-{point}"))
    await died(first)
    second = executors.spawn()
    view, results = await asyncio.wait_for(owner, 60)
    kinds = await history(ledger, f"run-{point}")
    if point == "after_claim":
        assert view.status == stead.RunStatus.COMPLETED
        assert pids("charge") == [second.pid]  # ran once, in the second executor
        assert kinds == [
            "accepted", "claimed", "restarted", "claimed", "started", "settled", "acknowledged"
        ]  # fmt: skip
    else:
        # It started: it may have happened (here it had not), so it is never rerun blindly.
        assert pids("charge") == []
        assert kinds == ["accepted", "claimed", "started", "restarted", "claimed", "settled"]
        assert view.status == stead.RunStatus.AWAITING_APPROVAL and results == []


FULL = bool(os.environ.get("STEAD_FULL_POOL_TESTS"))
"""Set (``make soak`` does): every crash point with every tool on both stores. Unset: every
case on SQLite, and each point once on PostgreSQL, to keep the suite fast (each case starts
two processes)."""
PG_CASES = {("before_settle", "charge"), ("mid_effect", "index_doc")}


@pytest.mark.parametrize("when", ["mid_effect", "before_settle"])
@pytest.mark.parametrize("tool", ["charge", "index_doc"])
async def test_executor_killed_after_the_effect(
    url: str, executors: Executors, ledger: Ledger, when: str, tool: str
) -> None:
    """SIGKILL inside the tool right after its side effect, or after the tool returned and
    before the settle was written. The key is started under a lapsed lease: the second
    executor reruns an idempotent_write (same idempotency key, twice in the world, as its
    class allows) and settles it; a non_idempotent charge is settled ``tool_unknown`` and
    never charged a second time."""
    if url.startswith("postgres") and not FULL and (when, tool) not in PG_CASES:
        pytest.skip("STEAD_FULL_POOL_TESTS=1 runs every case on PostgreSQL too")
    env = {"POOL_DIE_IN": tool} if when == "mid_effect" else {"POOL_CRASH_AT": "before_settle"}
    first = executors.spawn(**env)
    await served(ledger)
    run_id = f"run-{when}-{tool}"
    owner = asyncio.ensure_future(drive(url, tool, run_id))
    await died(first)
    second = executors.spawn()
    view, results = await asyncio.wait_for(owner, 60)
    kinds = await history(ledger, run_id)
    assert kinds.count("settled") == 1 and kinds.count("restarted") == 1
    if tool == "charge":
        assert pids("charge") == [first.pid]  # once, by the executor that died
        [effect_id] = await ledger.keys(run_id)
        row = await ledger.read(effect_id, now=time.time())
        assert row is not None and row.outcome is not None
        assert row.outcome["kind"] == "tool_unknown"
        assert view.status == stead.RunStatus.AWAITING_APPROVAL, view  # a person decides
    else:
        assert pids("index_doc") == [first.pid, second.pid]
        keys = {e["key"] for e in SideEffects(os.environ["STEAD_TEST_EFFECTS"]).entries()}
        assert len(keys) == 1  # the same idempotency key both times
        assert view.status == stead.RunStatus.COMPLETED
        assert len(results) == 1


async def test_a_zombie_executors_settle_is_refused(
    url: str, executors: Executors, ledger: Ledger
) -> None:
    """SIGSTOP an executor inside the tool, past its lease; a second executor restarts the
    effect and settles it; SIGCONT the first: nothing of it is accepted, and the run records
    one result, the second executor's. Woken, the first either finishes the tool and its
    settle is refused by the store (stale epoch), or its lease deadline fires first and it
    stands down without settling: which one is the order of two timers both overdue at
    SIGCONT (the tool's sleep, the deadline set at its last renewal), so both are allowed."""
    zombie = executors.spawn(POOL_TOOL_DELAY="1.5")
    await served(ledger)
    owner = asyncio.ensure_future(drive(url, "index_doc", "run-zombie"))

    async def started() -> bool:
        keys = await ledger.keys("run-zombie")
        return bool(keys) and "started" in await history(ledger, "run-zombie")

    await until_async(started, "the tool started", timeout=30)
    os.kill(zombie.pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(TTL * 1.5)
        second = executors.spawn()
        view, results = await asyncio.wait_for(owner, 60)
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
    assert view.status == stead.RunStatus.COMPLETED
    [result] = results
    assert str(second.pid) in result
    await asyncio.sleep(TTL)  # the zombie wakes, finishes or is told, tries to settle
    zombie.send_signal(signal.SIGTERM)
    out, err = zombie.communicate(timeout=30)
    performed, refused = (int(w.split("=")[1]) for w in out.split()[-2:])
    assert performed == 0 and refused <= 1, out + err  # never a settle of the stale holder
    kinds = await history(ledger, "run-zombie")
    assert kinds.count("settled") == 1 and kinds[-2:] == ["settled", "acknowledged"]


def tool_assignment(run_id: str, i: int) -> Assignment:
    return Assignment(
        key=AssignmentKey(session_id="s", run_id=run_id, effect_id=f"{run_id}-e{i}"),
        body=ToolBody(
            tool_name="index_doc",
            definition_digest="",
            arguments='{"doc": "d"}',
            effect_class="idempotent_write",
            replay_policy="rerun_with_key",
            tool_call_id=f"c{i}",
            turn_index=0,
            idempotency_key=f"k{i}",
            attempt=1,
        ),
    )


async def test_completions_survive_a_killed_listen_connection(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: the owner's LISTEN connection is terminated again and again while 24
    effects settle in an executor process; with polling set to a minute, every completion
    is still seen (each reconnect re-reads every key waited on)."""
    import psycopg

    monkeypatch.setenv("STEAD_TEST_EFFECTS", str(tmp_path / "effects.db"))
    ex = Executors(pg_url)
    store = open_store(pg_url)
    led = ledger_for(store, poll_interval=60.0)
    owner = StoreExecutor(store, queue_of=lambda a: QUEUE, ledger=led, wait_round=60.0)
    try:
        ex.spawn(POOL_TOOL_DELAY="0.05")
        await served(led)
        sig = stead.AbortSignal()
        assignments = [tool_assignment(f"r{i % 3}", i) for i in range(24)]
        waits = [asyncio.ensure_future(owner.run(a, signal=sig)) for a in assignments]
        kills = 0
        with psycopg.connect(pg_url, autocommit=True) as conn:
            while not all(w.done() for w in waits):
                row = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = 'stead-listen' AND pid <> pg_backend_pid()"
                    " AND datname = current_database()"
                ).fetchone()
                kills += row[0] if row else 0
                await asyncio.wait(waits, timeout=0.1)
        outcomes = [w.result() for w in waits]
        assert all(isinstance(o, ToolSucceeded) for o in outcomes)
        assert kills >= 2
    finally:
        ex.kill_all()
        await led.close()
        await store.close()


async def test_sigterm_lets_the_effect_in_hand_finish(
    url: str, executors: Executors, ledger: Ledger
) -> None:
    """SIGTERM while a tool runs: the executor claims nothing more, lets the effect finish
    within its grace, settles it, ends its lease and exits 0; the run completes with that
    executor's result."""
    proc = executors.spawn(POOL_TOOL_DELAY="0.5")
    await served(ledger)
    owner = asyncio.ensure_future(drive(url, "index_doc", "run-sigterm"))

    async def started() -> bool:
        return bool(await ledger.keys("run-sigterm")) and "started" in await history(
            ledger, "run-sigterm"
        )

    await until_async(started, "the tool started", timeout=30)
    proc.send_signal(signal.SIGTERM)
    view, results = await asyncio.wait_for(owner, 60)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "performed=1 refused=0" in out
    assert view.status == stead.RunStatus.COMPLETED and str(proc.pid) in results[0]
    assert not await ledger.serves(QUEUE, now=time.time())


async def test_an_executor_paused_past_its_lease_stands_down_before_its_effect(
    url: str, executors: Executors, ledger: Ledger
) -> None:
    """SIGSTOP an executor inside a careful non_idempotent tool (it looks at ``ctx.aborted``
    right before its effect), past its lease. A second executor takes the key over (started:
    settled unknown), the owner reconciles ("not done") and the second executor sends the
    message under a new key. SIGCONT the first: the key's local deadline passed while it
    was stopped, so it never performs the effect: its tool stands down at its last look, or
    the deadline cancels it first (two timers both overdue at SIGCONT, in either order). The
    message went out once."""
    paused = executors.spawn(POOL_TOOL_DELAY="1.5", POOL_CHECK_ABORTED="1")
    await served(ledger)
    owner = asyncio.ensure_future(drive(url, "notify", "run-paused"))

    async def started() -> bool:
        keys = await ledger.keys("run-paused")
        return bool(keys) and "started" in await history(ledger, "run-paused")

    await until_async(started, "the tool started", timeout=30)
    os.kill(paused.pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(TTL * 1.5)
        second = executors.spawn(POOL_CHECK_ABORTED="1")
        view, _results = await asyncio.wait_for(owner, 60)
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    assert view.status == stead.RunStatus.COMPLETED

    paused.send_signal(signal.SIGTERM)  # its grace lets a tool it still runs finish
    out, err = paused.communicate(timeout=30)
    assert paused.returncode == 0, err
    assert "performed=0" in out, out
    assert pids("notify") == [second.pid]  # once, by the executor that held the key then
