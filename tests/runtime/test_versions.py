"""Agent versions across deploys: the version a run started on is recorded; under ``continue``
a change is recorded and the run goes on, under ``fail`` the run fails naming both versions,
under ``pin`` only a worker of its version drives it (two worker processes of different
versions on one PostgreSQL, each driving only its own; ``stead runs list`` names runs
waiting for a version no worker has); a recorded call a changed tool can no longer take fails
the run in every policy."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _versioned import agent
from _workers import STEAD, WorkerProc

import stead
from _wait import until_async
from stead.core.events import AgentChanged, AgentRecorded
from stead.testing import ScriptedModel

HERE = Path(__file__).parent


@pytest.fixture(params=["sqlite", "postgres"])
def url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    monkeypatch.setenv("STEAD_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'v.db'}"
    else:
        yield request.getfixturevalue("pg_url")


async def waiting_run(url: str, version: str, on_change: str = "pin") -> tuple[str, str]:
    """A run of ``version`` stopped at its refund's approval, approved (not driven on)."""
    a = agent(version, on_change)
    async with stead.Runtime(url, agents=[a]) as rt:
        view = await rt.run(await rt.start(a, "refund order 1"))
        assert view.status.value == "awaiting_approval"
        call = view.approvals[0].tool_call_id
        await rt.approve(view.run_id, call)
        return view.run_id, a.fingerprint


async def kinds(rt: stead.Runtime, run_id: str) -> list[stead.core.events.Event]:  # type: ignore[name-defined]
    return [e.event for e in await rt.events(run_id)]


def test_fingerprints_differ_by_version_label_and_tools_and_agree_across_builds() -> None:
    assert agent("v1").fingerprint == agent("v1").fingerprint
    assert agent("v1").fingerprint != agent("v2").fingerprint
    other = stead.Agent("refunds", ScriptedModel([]), [], version="v1", on_change="pin")
    assert other.fingerprint != agent("v1").fingerprint  # its tools differ
    with pytest.raises(stead.UserError, match="on_change takes one of"):
        stead.Agent("x", ScriptedModel([]), on_change="maybe")  # type: ignore[arg-type]


async def test_continue_records_the_change_and_goes_on(url: str) -> None:
    rid, v1 = await waiting_run(url, "v1", "continue")
    a2 = agent("v2", "continue")
    async with stead.Runtime(url, agents=[a2]) as rt:
        done = await rt.run(rid)
        assert done.status.value == "completed" and done.output == "done by v2"
        events = await kinds(rt, rid)
        (recorded,) = [e for e in events if isinstance(e, AgentRecorded)]
        (changed,) = [e for e in events if isinstance(e, AgentChanged)]
        assert (recorded.fingerprint, recorded.version) == (v1, "v1")
        assert (changed.from_fingerprint, changed.to_fingerprint) == (v1, a2.fingerprint)
        assert (changed.from_version, changed.to_version) == ("v1", "v2")


async def test_fail_fails_the_run_naming_both_versions(url: str) -> None:
    rid, v1 = await waiting_run(url, "v1", "fail")
    a2 = agent("v2", "fail")
    async with stead.Runtime(url, agents=[a2]) as rt:
        view = await rt.run(rid)
        assert view.status.value == "failed"
        assert view.error is not None and view.error["code"] == "agent_changed"
        assert v1 in view.error["message"] and a2.fingerprint in view.error["message"]
        assert "(v1)" in view.error["message"] and "(v2)" in view.error["message"]


async def test_pin_leaves_a_run_of_another_version_untouched(url: str) -> None:
    rid, v1 = await waiting_run(url, "v1", "pin")
    a2 = agent("v2", "pin")
    async with stead.Runtime(url, agents=[a2]) as rt:
        before = await rt.store.get_run(rid)
        view = await rt.run(rid)
        after = await rt.store.get_run(rid)
        assert view.status.value == "awaiting_tool"
        assert after.last_seq == before.last_seq  # nothing written
        # its claim found nothing (pinned to v1): the worker's claim skips it altogether
        claims = await rt.store.claim_next(
            owner="w2", now=1e12, ttl=30, agents=["refunds"], fingerprints=[a2.fingerprint]
        )
        assert claims == []
        claims = await rt.store.claim_next(
            owner="w1", now=1e12, ttl=30, agents=["refunds"], fingerprints=[v1]
        )
        assert [c.run_id for c in claims] == [rid]


@pytest.mark.parametrize("policy", ["continue", "pin", "fail"])
async def test_a_recorded_call_a_changed_tool_cannot_take_fails_the_run(
    url: str, policy: str
) -> None:
    @stead.tool(effect="non_idempotent", requires_approval=lambda a: True)
    def refund(order_id: str, reason: str) -> str:  # the schema changed: a new required field
        """Refund an order."""
        raise AssertionError("never fed the old arguments")

    rid, _ = await waiting_run(url, "v1", "continue")
    same = stead.Agent(
        "refunds",
        ScriptedModel([]),
        [refund],
        version="v1",
        on_change=policy,  # type: ignore[arg-type]
    )
    async with stead.Runtime(url, agents=[same]) as rt:
        before = await rt.store.get_run(rid)
        view = await rt.run(rid)
        if policy == "pin":
            # Another version never drives it: the old call is left to the version that
            # made it, and nothing is written.
            assert view.status.value == "awaiting_tool"
            assert (await rt.store.get_run(rid)).last_seq == before.last_seq
        else:
            assert view.status.value == "failed" and view.error is not None
            code = "agent_changed" if policy == "fail" else "tool_changed"
            assert view.error["code"] == code, view.error
            if code == "tool_changed":
                assert "refund" in view.error["message"]
                assert "no longer fit" in view.error["message"]

    gone = stead.Agent("refunds", ScriptedModel([]), [], version="v9")
    rid, _ = await waiting_run(url, "v1", "continue")
    async with stead.Runtime(url, agents=[gone]) as rt:
        view = await rt.run(rid)
        assert view.error is not None and view.error["code"] == "tool_changed"
        assert "no longer has" in view.error["message"]


async def test_two_workers_of_different_versions_on_postgres_each_drive_only_their_own(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "tools.log"
    monkeypatch.setenv("STEAD_TEST_TOOL_LOG", str(tools))
    runs = {"v1": [], "v2": []}  # type: dict[str, list[str]]
    prints = {}
    for version in ("v1", "v2"):
        for _ in range(3):
            rid, prints[version] = await waiting_run(pg_url, version)
            runs[version].append(rid)

    def worker(version: str) -> WorkerProc:
        env = {"STEAD_TEST_VERSION": version, "STEAD_TEST_TOOL_LOG": str(tools)}
        return WorkerProc(
            pg_url,
            tmp_path / f"worker-{version}.log",
            "--agents",
            "_versioned:agents",
            "--poll",
            "0.05",
            env=env,
        )

    async with stead.Runtime(pg_url) as rt:

        async def finished(ids: list[str]) -> bool:
            return [(await rt.store.get_run(r)).status for r in ids] == ["completed"] * len(ids)

        epochs = {r: (await rt.store.get_run(r)).epoch for r in runs["v1"]}
        w2 = worker("v2")
        try:
            await until_async(lambda: finished(runs["v2"]), "worker v2 to finish the v2 runs")
            # v1's runs: never claimed by v2 (same epoch), and listed as waiting for v1
            for r in runs["v1"]:
                row = await rt.store.get_run(r)
                assert row.status == "awaiting_tool" and row.epoch == epochs[r]
            listing = await asyncio.to_thread(
                subprocess.run,
                [STEAD, "--store", pg_url, "runs", "list"],
                capture_output=True,
                text=True,
                env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
            )
            text = " ".join(listing.stdout.split())
            for r in runs["v1"]:
                assert f"{r} waits for agent refunds at {prints['v1']}" in text, text
            assert prints["v2"] not in text
            as_json = await asyncio.to_thread(
                subprocess.run,
                [STEAD, "--store", pg_url, "runs", "list", "--json"],
                capture_output=True,
                text=True,
            )
            waits = {
                row["run_id"]: row.get("waits_for_version")
                for row in map(json.loads, as_json.stdout.splitlines())
            }
            assert all(waits[r] == prints["v1"] for r in runs["v1"]), waits
            assert not any(waits[r] for r in runs["v2"]), waits
            w1 = worker("v1")
            try:
                await until_async(lambda: finished(runs["v1"]), "worker v1 to finish the v1 runs")
            finally:
                assert w1.stop() == 0, w1.text()
        finally:
            assert w2.stop() == 0, w2.text()
        for version, ids in runs.items():
            for r in ids:
                events = await kinds(rt, r)
                assert not any(isinstance(e, AgentChanged) for e in events)
                assert [e.fingerprint for e in events if isinstance(e, AgentRecorded)] == [
                    prints[version]
                ]
    ran = sorted(tools.read_text().split("\n")[:-1])
    assert ran == sorted(f"{v} {r}" for v, ids in runs.items() for r in ids)
