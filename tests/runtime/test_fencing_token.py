"""The fencing token refuses a holder paused between its check and its effect.

Worker A (a ``stead worker`` process, 2 s lease) runs ``notify_fenced``: it looks at
``ctx.aborted`` (False: its lease is fresh) and freezes its own process with SIGSTOP right
after, before it sends: the one window no check inside the process can close. The lease
lapses; worker B takes the run over, reconciles the call (the service has no message: not
done), and sends it through the fenced message service of docs/recovery.md with its token,
higher than A's. A is woken with SIGCONT and sends with its stale token: the service
refuses it. The message went out once, B's; both stores.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from _crash_harness import Scenario
from _scenario import side_effects
from _workers import WorkerProc

from _wait import until_async
from stead.core.canonical import idempotency_key
from stead.runtime import Runtime
from stead.store import open_store
from stead.testing import assert_valid_history

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, scenario: Scenario) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{scenario.store}"
    return str(request.getfixturevalue("pg_url"))


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


async def test_the_service_refuses_a_holder_paused_between_its_check_and_its_effect(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import _fenced
    import _fleet

    monkeypatch.setenv("INBOX_DB", str(tmp_path / "inbox.db"))
    agent = _fleet.fenced()
    store = open_store(url)
    workers: list[WorkerProc] = []
    try:
        async with Runtime(store, agents=[agent]) as rt:
            run_id = await rt.start(agent, "Tell on-call about order 7")
            key = idempotency_key(run_id, "call_0_0")
            a = WorkerProc(
                url, tmp_path / "a.log", "--lease-ttl", "2", "--poll", "0.1",
                env={"STEAD_TEST_PAUSE_AFTER_CHECK": "1"},
            )  # fmt: skip
            workers.append(a)

            async def a_paused_after_its_check() -> bool:
                return side_effects().count("checked") == 1 and _stopped(a.pid)

            await until_async(a_paused_after_its_check, "worker A to check, then freeze")

            async def lease_lapsed() -> bool:
                return ((await store.get_run(run_id)).lease_expires_at or 0) < time.time()

            await until_async(lease_lapsed, "A's lease to lapse")
            b = WorkerProc(url, tmp_path / "b.log", "--lease-ttl", "30", "--poll", "0.1")
            workers.append(b)

            async def b_finished() -> bool:
                return (await store.get_run(run_id)).status == "completed"

            await until_async(b_finished, "worker B to take the run over and finish it")
            a.signal(signal.SIGCONT)  # A sends, with its stale token

            async def a_refused() -> bool:
                return side_effects().count("refused") == 1

            await until_async(a_refused, "the service to refuse A")
            assert await asyncio.to_thread(a.stop) == 0, a.text()
            assert await asyncio.to_thread(b.stop) == 0, b.text()

            [sent] = side_effects().entries("sent")
            [refused] = side_effects().entries("refused")
            assert (sent["pid"], refused["pid"]) == (b.pid, a.pid)
            assert sent["detail"]["token"] > refused["detail"]["token"]
            inbox = _fenced.service().Inbox(str(tmp_path / "inbox.db"))
            assert inbox.db.execute("SELECT count(*) FROM messages").fetchone() == (1,)
            assert inbox.sent(key) is not None
            assert_valid_history(await rt.state(run_id))
    finally:
        for w in workers:
            w.stop()
        await store.close()
