"""An executor process cut off from PostgreSQL past its key's lease stands down before its
effect, and gives the key up quietly once the network heals.

Executor A (``pool_child.py``: what ``stead executor`` runs, a 2 s lease) runs in a network
namespace of its own and reaches PostgreSQL over a veth pair and a relay. It claims the
run's ``notify`` call, a non_idempotent tool that records ``working``, waits for a gate
file and looks at ``ctx.aborted`` right before it sends. The test takes the veth link down:
A's heartbeats go unanswered, its lease lapses in the store, and executor B (in this
namespace) takes the key over (started: settled unknown); the run's owner (this process)
reconciles the call ("not done") and B sends the message. Then the gate opens while A is
still cut off: the key's local deadline passed long ago, so ``ctx.aborted`` is True and the
tool stands down. The link comes up; A's settle is refused (stale epoch), and A stops
cleanly on SIGTERM having performed nothing. The message went out once. Root only.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _netns import Netns, need_root_and_ip
from _pool_scenario import QUEUE, agent
from _relay import Relay

import stead
from _wait import until_async
from stead.store.ledger._ledger import ledger_for
from stead.testing import SideEffects

pytestmark = pytest.mark.timeout(180)

CHILD = Path(__file__).parent / "pool_child.py"


def executor(
    url: str, ttl: str, log: Path, netns: str | None = None, **env: str
) -> subprocess.Popen[str]:
    """A ``pool_child.py`` process; its log (warnings) goes to ``log``."""
    inside = ["ip", "netns", "exec", netns] if netns is not None else []
    with log.open("w") as out:
        return subprocess.Popen(
            [*inside, sys.executable, str(CHILD), url, ttl],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
        )


async def test_an_executor_cut_off_past_its_lease_does_not_perform_its_effect(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_root_and_ip()
    monkeypatch.setenv("STEAD_TEST_EFFECTS", str(tmp_path / "effects.db"))
    effects = SideEffects(str(tmp_path / "effects.db"))
    gate = tmp_path / "gate"
    netns = Netns()
    relay = Relay(pg_url, host=netns.host)
    procs: list[subprocess.Popen[str]] = []
    try:
        a_log = tmp_path / "a.log"
        a = executor(
            relay.url, "2", a_log, netns.name, POOL_TOOL_GATE=str(gate), POOL_CHECK_ABORTED="1"
        )
        procs.append(a)
        notify = agent("notify")
        async with stead.Runtime(pg_url, agents=[notify]) as rt:
            ledger = ledger_for(rt.store)

            async def a_serves() -> bool:
                return await ledger.serves(QUEUE, now=time.time())

            try:
                await until_async(a_serves, "executor A to serve the queue")
            finally:
                await ledger.close()
            run_id = await rt.start(notify, "tell ops")
            owner = asyncio.ensure_future(rt.run(run_id))

            async def a_works() -> bool:
                return effects.count("working") == 1

            await until_async(a_works, "executor A to start the tool", every=0.01)
            netns.cut()
            b = executor(pg_url, "30", tmp_path / "b.log", POOL_CHECK_ABORTED="1")
            procs.append(b)
            view = await asyncio.wait_for(owner, 90)  # B took the key over once A's lapsed
            assert view.status == stead.RunStatus.COMPLETED, view
            assert [e["pid"] for e in effects.entries("notify")] == [b.pid]
            log_before = await rt.events(run_id)

            gate.touch()  # A's tool reaches its effect, A still cut off

            async def a_stood_down() -> bool:
                return effects.count("stood_down") == 1

            await until_async(a_stood_down, "A's tool to see that its key's lease is gone")
            netns.heal()

            async def a_refused() -> bool:
                return "refused (taken over)" in a_log.read_text()

            await until_async(a_refused, "A's settle to reach the store and be refused")
            assert a.poll() is None, a_log.read_text()  # alive, and quiet about it
            a.send_signal(signal.SIGTERM)
            out, err = await asyncio.to_thread(a.communicate, timeout=60)
            assert a.returncode == 0, err
            assert "performed=0 refused=1" in out, out  # A settled nothing: it was fenced

            assert [e["pid"] for e in effects.entries("notify")] == [b.pid]  # once, by B
            tokens = {e["pid"]: e["detail"]["token"] for e in effects.entries("working")}
            [stood_down] = effects.entries("stood_down")
            assert stood_down["detail"]["token"] == tokens[a.pid] >= 1
            assert await rt.events(run_id) == log_before
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)
        relay.stop()
        netns.close()
