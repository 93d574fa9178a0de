"""``stead effects list/show``, run as a real process on a run a takeover reconciled: a row
per key with its state and verdicts, one effect's events, JSON, and a clear error for an
effect id that names none."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

from test_cli import stead_cli

import stead
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
    shown = stead_cli("--store", store, "effects", "show", "run_eff", disposed["effect_id"][:8])
    assert shown.returncode == 0, shown.stderr
    assert "verdict" in shown.stdout and "dispose" in shown.stdout
    one = stead_cli("--store", store, "effects", "show", rid, disposed["effect_id"], "--json")
    assert json.loads(one.stdout)["effect_id"] == disposed["effect_id"]
    missing = stead_cli("--store", store, "effects", "show", rid, "zzzz")
    assert missing.returncode != 0
    assert "no effect" in missing.stderr and "stead effects list" in missing.stderr
