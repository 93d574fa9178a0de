"""``stead effects list/show``, run as a real process on a run a takeover reconciled: a row
per key with its state and verdicts, one effect's events, JSON, and a clear error for an
effect id that names none."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
import time
from pathlib import Path

from test_cli import stead_cli

import stead
from _wait import until_async
from stead.store import Claim
from stead.testing import Reply, ScriptedModel


class Die(BaseException):
    pass


@stead.tool(effect="read_only")
def peek(what: str) -> str:
    """Look at something."""
    return f"saw {what}"


def _taken_over_run(store: str) -> str:
    agent = stead.Agent(
        "eff-cli", ScriptedModel([Reply(tool_calls=[("peek", {"what": "x"})]), "ok"]), [peek]
    )

    def die(point: str, tool: str | None) -> None:
        if point == "after_intent":
            raise Die

    async def go() -> str:
        async with stead.Runtime(store, agents=[agent], crash=die) as rt:
            rid = await rt.start(agent, "go", run_id="run_effects_1")
            with contextlib.suppress(Die):
                await rt.run(rid)
        async with stead.Runtime(store, agents=[agent]) as rt:
            epoch = await rt.store.claim(rid, owner=rt.owner, now=time.time(), ttl=30)
            claim = Claim(
                run_id=rid, agent=agent.name, status="running", epoch=epoch, previous_owner="dead"
            )
            await rt.run(rid, claim=claim)
        return rid

    return asyncio.run(go())


def test_effects_list_and_show(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    rid = _taken_over_run(store)
    listed = stead_cli("--store", store, "effects", "list", rid)
    assert listed.returncode == 0, listed.stderr
    assert "disposed" in listed.stdout and "dispose (aborted)" in listed.stdout
    lines = stead_cli("--store", store, "effects", "list", rid, "--json")
    rows = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [(r["name"], r["attempt"], r["state"]) for r in rows] == [
        ("model", 1, "settled"),
        ("peek", 1, "disposed"),
        ("peek", 2, "settled"),
        ("model", 1, "settled"),
    ]
    disposed = rows[1]
    assert disposed["verdicts"][0]["verdict"] == "dispose"
    shown = stead_cli("--store", store, "effects", "show", "run_effe", disposed["effect_id"][:8])
    assert shown.returncode == 0, shown.stderr
    assert "recovery" in shown.stdout and "dispose" in shown.stdout
    one = stead_cli("--store", store, "effects", "show", rid, disposed["effect_id"], "--json")
    assert json.loads(one.stdout)["effect_id"] == disposed["effect_id"]
    missing = stead_cli("--store", store, "effects", "show", rid, "zzzz")
    assert missing.returncode != 0
    assert "no effect" in missing.stderr
    (hint,) = re.findall(r"`(stead [^`]+)`", missing.stderr)  # runs as printed
    again = stead_cli(*shlex.split(hint)[1:])
    assert again.returncode == 0 and disposed["effect_id"][:12] in again.stdout, again.stderr


@stead.tool(effect="read_only", queue="fx")
def far(what: str) -> str:
    """Look at something, in an executor."""
    return f"far {what}"


def _pooled_run(store: str) -> str:
    from stead.runtime import Pool

    agent = stead.Agent(
        "eff-pool",
        ScriptedModel([Reply(tool_calls=[("far", {"what": "x"}), ("peek", {"what": "y"})]), "ok"]),
        [far, peek],
    )

    async def go() -> str:
        pool = Pool(store, [agent], queues=["fx"], poll_interval=0.02)
        serving = asyncio.ensure_future(pool.run())
        try:
            await until_async(
                lambda: pool.ledger.serves("fx", now=time.time()), "the pool serving", timeout=12
            )
            async with stead.Runtime(store, agents=[agent]) as rt:
                rid = await rt.start(agent, "go", run_id="run_effects_pool")
                assert (await rt.run(rid)).status == stead.RunStatus.COMPLETED
        finally:
            pool.stop()
            pool.stop()
            await serving
            await pool.close()
        return pool.id

    return asyncio.run(go())


def test_effects_say_where_each_ran(tmp_path: Path) -> None:
    """A call an executor pool performed shows its queue, executor, epoch and claims (from
    the execution ledger); one the run performed itself says in process."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    executor = _pooled_run(store)
    lines = stead_cli("--store", store, "effects", "list", "run_effects_pool", "--json")
    assert lines.returncode == 0, lines.stderr
    rows = {r["name"]: r for r in map(json.loads, lines.stdout.splitlines())}
    assert rows["far"]["ledger"] == {
        "phase": "acknowledged",
        "queue": "fx",
        "executor": executor,
        "epoch": 1,
        "attempts": 1,
        "claims": [{"executor": executor, "epoch": 1}],
    }
    assert rows["peek"]["ledger"] is None
    listed = stead_cli("--store", store, "effects", "list", "run_effects_pool")
    assert "ran at" in listed.stdout and "in process" in listed.stdout
    shown = stead_cli("--store", store, "effects", "show", "run_effects_pool",
                      rows["far"]["effect_id"])  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"claims: {executor} at epoch 1" in " ".join(shown.stdout.split())
