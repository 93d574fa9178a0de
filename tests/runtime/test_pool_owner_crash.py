"""The run's owner SIGKILLed at every step of handing an effect to an executor pool, on both
stores.

The owner is a child process (``pool_owner_child.py``: a ``Runtime`` whose agent routes its
tools to queue ``pool``); the pool (``Pool``, what ``stead executor`` runs) lives in this test's
process, so it outlives every owner it serves, and so does the new owner that takes each run
over (a ``Runtime`` here). Side effects go to an ``SideEffects`` outside both stores, so what
really happened is known after each SIGKILL.

The steps, for ``notify`` (non_idempotent, with a reconcile function):

    before dispatch     after_tool_started: the start is durable, nothing is in the ledger
    after acceptance    after_dispatch: the ledger accepted it, the owner saw no outcome
    mid effect          killed from outside while the pool's tool is inside its effect
    after settled       after_tool_effect: the pool settled it, the run has not recorded it

and the redispatch records for ``index_doc`` (idempotent_write, ``RecoveryPolicy(
missing="redispatch")``): killed before its first dispatch, then before a redispatch, after
``planned``, after the pool accepted the redispatch (before ``dispatched``). After each: the new
owner finishes the run, the effect happened once, every call has one result, the budget is not
overspent, and the ledger settled each key once.

``make test`` runs every step on PostgreSQL and two of them on SQLite; ``make soak``
(``STEAD_FULL_POOL_TESTS=1``) every step on both, and with index_doc too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _pool_scenario import HOLDS, QUEUE, Hold, agent, agents
from test_pool_processes import FULL, served

import stead
from stead.core.events import EffectReconciled, Event, RedispatchRecorded, ToolResultRecorded
from stead.runtime.processes._pool import Pool
from stead.store.ledger._ledger import Ledger
from stead.testing import SideEffects, assert_valid_history

CHILD = Path(__file__).parent / "pool_owner_child.py"
KILLED = -signal.SIGKILL
REDISPATCH = stead.RecoveryPolicy(missing="redispatch")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STEAD_TEST_EFFECTS", str(tmp_path / "effects.db"))
    monkeypatch.delenv("STEAD_CRASH_AT", raising=False)
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
async def pool(url: str) -> AsyncIterator[Pool]:
    """An executor pool in this process (it outlives the owners the tests kill)."""
    async with serving(url, agents(), [QUEUE]) as p:
        yield p


@contextlib.asynccontextmanager
async def serving(url: str, agents: list[stead.Agent], queues: list[str]) -> AsyncIterator[Pool]:
    # The pool outlives every owner here and is never the one killed, so its lease only has to
    # survive a loaded machine: at 3 s, a test process starved of the CPU for a lease missed
    # its beats, the pool stood its held tool down and ran it again (correctly, and a history
    # these tests do not expect).
    p = Pool(
        url, agents, queues=queues, concurrency=4, lease_ttl=15.0, poll_interval=0.05,
        grace=1.0,
    )  # fmt: skip
    task = asyncio.ensure_future(p.run())
    try:
        await served(p.ledger)
        yield p
    finally:
        HOLDS.clear()
        p.stop()
        p.stop()
        await asyncio.wait_for(task, 30)
        await p.close()


async def owner(
    url: str, run_id: str, tool: str, mode: str, crash: str | None, **env: str
) -> asyncio.subprocess.Process:
    child_env = {**os.environ, **env}
    if crash:
        child_env["STEAD_CRASH_AT"] = crash
    return await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), url, run_id, tool, mode,
        env=child_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def killed(proc: asyncio.subprocess.Process) -> None:
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == KILLED, err.decode()[-3000:]


async def take_over(
    url: str, run_id: str, tool: str, recovery: stead.RecoveryPolicy | None = None
) -> tuple[stead.RunView, list[Event]]:
    """A new owner, here, drives the run its dead owner left; (its view, its log)."""
    a = agent(tool)
    async with stead.Runtime(url, agents=[a], recovery=recovery) as rt:
        view = await asyncio.wait_for(rt.run(run_id), 60)
        events = [e.event for e in await rt.events(run_id)]
        assert_valid_history(await rt.state(run_id))
    return view, events


def effects(name: str) -> list[str]:
    """The idempotency keys ``name`` really ran with (the world's record, not the log's)."""
    return SideEffects(os.environ["STEAD_TEST_EFFECTS"]).keys(name)


async def settled_once(ledger: Ledger, run_id: str) -> list[list[str]]:
    """Every key of the run settled at most once; their histories."""
    out = []
    for key in await ledger.keys(run_id):
        kinds = [e.kind for e in await ledger.history(key)]
        assert kinds.count("settled") <= 1, kinds
        out.append(kinds)
    return out


def check_log(events: list[Event]) -> list[tuple[str, str]]:
    """One result per call; the redispatch budget (3) not overspent, no attempt planned
    twice. The verdicts (verdict, observed)."""
    results = Counter(
        (e.turn_index, e.tool_call_id) for e in events if isinstance(e, ToolResultRecorded)
    )
    assert set(results.values()) == {1}, results
    planned = [
        e.attempt for e in events if isinstance(e, RedispatchRecorded) and e.step == "planned"
    ]
    assert len(planned) == len(set(planned)) <= REDISPATCH.max_redispatches, planned
    return [(e.verdict, e.observed) for e in events if isinstance(e, EffectReconciled)]


STEPS = {
    "before_dispatch": "after_tool_started:{tool}",
    "after_acceptance": "after_dispatch:{tool}",
    "mid_effect": None,
    "after_settled": "after_tool_effect:{tool}",
}
"""Where the owner dies (``{tool}`` the tool's name); ``mid_effect`` is a kill from outside.
An idempotent_write records no start, so its "before dispatch" is right after the intent."""
TOOLS = ["notify", "index_doc"] if FULL else ["notify"]
"""index_doc (idempotent_write) too with STEAD_FULL_POOL_TESTS."""
SQLITE_STEPS = {"before_dispatch", "mid_effect"}
"""In ``make test``: every step on PostgreSQL, these on SQLite (one child process each);
``make soak`` (STEAD_FULL_POOL_TESTS) runs every step on both."""


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("step", list(STEPS))
async def test_the_owner_killed_at_a_step_of_the_handoff(
    url: str, pool: Pool, step: str, tool: str
) -> None:
    if url.startswith("sqlite") and not FULL and step not in SQLITE_STEPS:
        pytest.skip("STEAD_FULL_POOL_TESTS=1 runs every step on SQLite too")
    run_id = f"run-{step}"
    crash = STEPS[step]
    if tool == "index_doc" and step == "before_dispatch":
        crash = "after_intent"
    if step == "mid_effect":
        hold = HOLDS[tool] = Hold()
    proc = await owner(url, run_id, tool, "start", crash and crash.format(tool=tool))
    if step == "mid_effect":
        await asyncio.wait_for(hold.entered.wait(), 60)
        proc.send_signal(signal.SIGKILL)
        await killed(proc)
        hold.released.set()
    else:
        await killed(proc)
    view, events = await take_over(url, run_id, tool)
    assert view.status is stead.RunStatus.COMPLETED, view
    verdicts = check_log(events)
    assert len(effects(tool)) == 1  # once in the world, whatever the step
    keys = await settled_once(pool.ledger, run_id)
    if step == "before_dispatch":
        # Nothing reached the pool: the key is aborted, the call settled unknown, and its
        # class (notify's reconcile function: not sent; index_doc: rerun with its
        # idempotency key) lets a second attempt run, under a new effect key.
        assert verdicts == [("dispose", "aborted")]
        assert keys == [["aborted"], ["accepted", "claimed", "started", "settled", "acknowledged"]]
    else:
        # Accepted (or run, or settled) by the pool: kept, its outcome recorded once, and
        # the key acknowledged (the run recorded it).
        assert verdicts in ([("keep", "active")], [("keep", "terminal")]), verdicts
        assert keys == [["accepted", "claimed", "started", "settled", "acknowledged"]]
    [result] = [e for e in events if isinstance(e, ToolResultRecorded)]
    assert json.loads(result.content)["done"] == tool  # the pool's, not a reconcile's


REDISPATCH_STEPS = (
    ["after_intent", "before_redispatch", "after_redispatch_planned", "after_redispatch_accepted"]
    if FULL
    else ["after_intent", "after_redispatch_planned", "after_redispatch_accepted"]
)
"""Each a SIGKILL of the next owner; ``before_redispatch`` (nothing written, as after_intent)
only with STEAD_FULL_POOL_TESTS."""


async def test_the_owner_killed_at_every_step_of_a_redispatch_to_the_pool(
    url: str, pool: Pool
) -> None:
    if url.startswith("sqlite") and not FULL:
        pytest.skip("STEAD_FULL_POOL_TESTS=1 runs the redispatch chain on SQLite too")
    run_id = "run-redispatch"
    env = {"STEAD_TEST_RECOVERY": "redispatch"}
    for i, point in enumerate(REDISPATCH_STEPS):
        await killed(await owner(url, run_id, "index_doc", "run" if i else "start", point, **env))
    view, events = await take_over(url, run_id, "index_doc", REDISPATCH)
    assert view.status is stead.RunStatus.COMPLETED, view
    verdicts = check_log(events)
    # The attempt planned once was offered again after each death, never planned anew; the
    # pool accepted it once and ran it once; the last owner kept what the pool did.
    ledger = [(e.step, e.attempt) for e in events if isinstance(e, RedispatchRecorded)]
    assert ledger == [("planned", 1)]
    assert verdicts[-1][0] == "keep", verdicts
    assert len(effects("index_doc")) == 1
    assert await settled_once(pool.ledger, run_id) == [
        ["accepted", "claimed", "started", "settled", "acknowledged"]
    ]


async def test_a_run_whose_every_effect_ran_in_the_pool_leaves_each_key_acknowledged(
    url: str,
) -> None:
    """Model calls and the tool call in the pool: each key is acknowledged once the run has
    recorded its outcome, the last model call's too (no effect comes after it to carry the
    acknowledgement)."""
    a = agent("index_doc", model_queue="pool-model")
    async with serving(url, [a], [QUEUE, "pool-model"]) as p, stead.Runtime(url, agents=[a]) as rt:
        await rt.start(a, "go", run_id="run-acked")
        view = await rt.run("run-acked")
        assert view.status is stead.RunStatus.COMPLETED
        assert await settled_once(p.ledger, "run-acked") == 3 * [
            ["accepted", "claimed", "started", "settled", "acknowledged"]
        ]
