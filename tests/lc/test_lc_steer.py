"""A LangChain agent driven by ``stead worker`` and steered from other processes: a call
that needs approval is asked under the worker and decided by ``stead approve``, after which
the worker finishes the same run; ``stead cancel`` stops a run whose tool is running, through
the tool's signal, with a valid history. One worker and one wire server serve the module."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wire_server import WireServer
from wire_shapes import openai_stream

import stead
from _wait import until
from stead.store import open_store

HERE = Path(__file__).parent
STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]
DESK = "lc_steer_support:agent"
MESSAGE = '{"to": "ada@example.com", "text": "Your refund is on its way."}'


@dataclass
class Desk:
    store: str
    server: WireServer
    env: dict[str, str]
    ledger: Path
    marks: Path

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*STEAD, "--store", self.store, *args],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
            env=self.env,
            cwd=HERE,
        )

    def start(self, text: str) -> str:
        async def go() -> str:
            import lc_steer_support

            async with stead.Runtime(self.store, agents=[lc_steer_support.agent]) as rt:
                return await rt.start(lc_steer_support.agent, text)

        return asyncio.run(go())

    def status(self, run_id: str) -> str:
        return self.log(run_id)[0]

    def log(self, run_id: str) -> tuple[str, list[Any]]:
        async def go() -> tuple[str, list[Any]]:
            s = open_store(self.store)
            try:
                record = await s.get_run(run_id)
                return str(record.status), [e.event for e in await s.read_events(run_id)]
            finally:
                await s.close()

        return asyncio.run(go())


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    tmp = tmp_path_factory.mktemp("desk")
    with WireServer() as server:
        env = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
        env.update(
            LC_BASE_URL=server.url,
            STEAD_TEST_LEDGER=str(tmp / "deliveries.jsonl"),
            STEAD_TEST_MARKS=str(tmp),
            COLUMNS="160",
        )
        d = Desk(f"sqlite:///{tmp / 'runs.db'}", server, env, tmp / "deliveries.jsonl", tmp)
        worker = subprocess.Popen(
            [*STEAD, "--store", d.store, "worker", "--agents", DESK, "--poll", "0.1"],
            env=env,
            cwd=HERE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            yield d
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.communicate(timeout=60)


def test_an_approval_asked_under_the_worker_is_decided_in_another_process(desk: Desk) -> None:
    desk.server.push(
        openai_stream(tools=[("call_send", "send_message", [MESSAGE])]),
        openai_stream("Ada has been told."),
    )
    run_id = desk.start("Tell Ada her refund is on its way.")
    until(lambda: desk.status(run_id) == "awaiting_approval", "the worker to ask for approval")
    assert not desk.ledger.exists()  # nothing sent before a person decided

    decided = desk.cli("approve", run_id, "call_send")
    assert decided.returncode == 0, decided.stdout + decided.stderr

    until(lambda: desk.status(run_id) == "completed", "the worker to finish the approved run")
    assert len(desk.ledger.read_text().splitlines()) == 1  # sent once, after the approval
    _, events = desk.log(run_id)
    assert [e.kind for e in events].count("approval_decided") == 1


def test_cancel_from_another_process_stops_the_running_tool(desk: Desk) -> None:
    desk.server.push(openai_stream(tools=[("call_wait", "wait_for_parcel", ["{}"])]))
    run_id = desk.start("Wait for the parcel.")
    until(lambda: (desk.marks / "started").exists(), "the tool to start under the worker")

    cancelled = desk.cli("cancel", run_id, "--reason", "the customer left")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr

    until(lambda: desk.status(run_id) == "cancelled", "the worker to end the run cancelled")
    assert (desk.marks / "aborted").exists()  # the tool saw its signal
    _, events = desk.log(run_id)
    results = [e for e in events if e.kind == "tool_result_recorded"]
    assert [r.tool_call_id for r in results] == ["call_wait"]  # a valid history
    assert events[-1].kind == "run_cancelled"
