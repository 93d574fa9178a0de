"""Fork on SQLite and PostgreSQL: a fork of a finished run and of a run waiting on a person
carries the source's results as history (the forked run completes without running any of
them again), leaves a call in flight behind, records its lineage, branches a conversation;
a SIGKILL during a fork leaves the whole fork or nothing."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _crash_harness import KILLED, finish

import stead
from stead.cli import main
from stead.core.events import RunForked, ToolCallRequested
from stead.core.messages import ToolResultMessage
from stead.testing import Reply, ScriptedModel, assert_valid_history

CHILD = Path(__file__).parent / "lifecycle_child.py"
RAN: list[int] = []
"""Orders the lookup tool was run for, in this process."""


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    RAN.clear()
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'f.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@stead.tool(effect="read_only")
def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up."""
    RAN.append(order_id)
    return {"order_id": order_id, "status": "shipped"}


@stead.tool(effect="non_idempotent", requires_approval=lambda a: True)
def refund(order_id: int) -> str:
    """Refund an order."""
    RAN.append(-order_id)
    return "refunded"


def support() -> stead.Agent:
    replies = [Reply(tool_calls=[("lookup", {"order_id": i})]) for i in range(3)]
    return stead.Agent("support", ScriptedModel([*replies, Reply(text="done")]), [lookup])


def approver() -> stead.Agent:
    script = [Reply(tool_calls=[("refund", {"order_id": 7})]), Reply(text="left it")]
    return stead.Agent("approver", ScriptedModel(script), [refund])


async def exported(rt: stead.Runtime, run_id: str) -> str:
    out = io.StringIO()
    await rt.export(out, run_ids=[run_id])
    return out.getvalue()


async def test_a_fork_of_a_finished_run_reruns_nothing_it_carries(url: str) -> None:
    agent = support()
    async with stead.Runtime(url, agents=[agent]) as rt:
        source = await rt.run(await rt.start(agent, "check orders"))
        assert source.status.value == "completed" and RAN == [0, 1, 2]
        before = await exported(rt, source.run_id)

        fork = await rt.fork(source.run_id, at_turn=1, input="and once more")
        assert fork.status.value == "queued"
        events = [e.event for e in await rt.events(fork.run_id)]
        lineage = events[1]
        assert isinstance(lineage, RunForked)
        assert (lineage.source_run_id, lineage.at_turn) == (source.run_id, 1)
        assert (lineage.carried_results, lineage.dropped_calls) == (2, 0)

        done = await rt.run(fork.run_id)
        assert done.status.value == "completed" and done.output == "done"
        assert RAN == [0, 1, 2, 2]  # only the turn after the fork point ran
        requested = [
            e.event for e in await rt.events(fork.run_id) if isinstance(e.event, ToolCallRequested)
        ]
        assert [r.arguments for r in requested] == ['{"order_id":2}']
        results = [m for m in done.messages if isinstance(m, ToolResultMessage)]
        assert [m.content for m in results][:2] == [
            m.content for m in source.messages if isinstance(m, ToolResultMessage)
        ][:2]
        assert_valid_history(await rt.state(done.run_id))
        assert await exported(rt, source.run_id) == before  # the source is untouched


async def test_a_fork_of_a_run_waiting_on_a_person_leaves_the_pending_call_behind(
    url: str,
) -> None:
    agent = approver()
    async with stead.Runtime(url, agents=[agent]) as rt:
        source = await rt.run(await rt.start(agent, "refund 7"))
        assert source.status.value == "awaiting_approval"
        fork = await rt.fork(source.run_id, at_turn=0, input="leave it")
        lineage = (await rt.events(fork.run_id))[1].event
        assert isinstance(lineage, RunForked) and lineage.dropped_calls == 1
        done = await rt.run(fork.run_id)
        assert done.status.value == "completed" and done.output == "left it"
        (left,) = [m for m in done.messages if isinstance(m, ToolResultMessage)]
        assert left.is_error and source.run_id in left.content
        assert_valid_history(await rt.state(done.run_id))
        assert RAN == []  # the refund never ran, in either run
        still = await rt.get(source.run_id)
        assert still.status.value == "awaiting_approval" and still.approvals


async def test_a_fork_of_a_conversation_run_starts_a_branch(url: str) -> None:
    chat = stead.Agent("chat", ScriptedModel([Reply(text="hi")] * 6), [])
    async with stead.Runtime(url, agents=[chat]) as rt:
        await rt.send("c-1", "first", agent=chat)
        second = await rt.send("c-1", "second")
        fork = await rt.fork(second.run_id, at_turn=0, input="instead")
        await rt.run(fork.run_id)
        branch = fork.conversation_id
        assert branch and branch != "c-1"
        after = await rt.send(branch, "then")
        users = [m.content for m in after.messages if m.role == "user"]
        assert users == ["first", "second", "instead", "then"]
        trunk = await rt.send("c-1", "third")  # the conversation it came from goes on
        assert [m.content for m in trunk.messages if m.role == "user"] == [
            "first",
            "second",
            "third",
        ]


async def test_a_fork_at_a_turn_the_run_never_reached_is_refused(url: str) -> None:
    agent = support()
    async with stead.Runtime(url, agents=[agent]) as rt:
        rid = (await rt.run(await rt.start(agent, "x"))).run_id
        for turn in (-1, 4, True):
            with pytest.raises(stead.UserError, match="turns 0 to 3"):
                await rt.fork(rid, at_turn=turn, input="y")  # type: ignore[arg-type]
        with pytest.raises(stead.UserError):
            await rt.fork(rid, at_turn=1, input=b"y")  # type: ignore[arg-type]
        assert len(await rt.list_runs()) == 1


def test_a_crash_during_a_fork_leaves_the_whole_fork_or_nothing(tmp_path: Path) -> None:
    import asyncio

    url = f"sqlite:///{tmp_path / 'f.db'}"

    async def source() -> str:
        agent = support()
        async with stead.Runtime(url, agents=[agent]) as rt:
            return (await rt.run(await rt.start(agent, "x"))).run_id

    rid = asyncio.run(source())

    def child(crash: str | None) -> Any:
        env = {k: v for k, v in __import__("os").environ.items() if k != "STEAD_CRASH_AT"}
        if crash:
            env["STEAD_CRASH_AT"] = crash
        p = subprocess.Popen(
            [sys.executable, str(CHILD), url, "fork", rid, "1", "again"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = p.communicate(timeout=60)
        return finish(p, out, err)

    killed = child("before_fork_commit")
    assert killed.returncode == KILLED, killed.stderr

    async def runs() -> list[str]:
        async with stead.Runtime(url, agents=[support()]) as rt:
            return [r.run_id for r in await rt.list_runs()]

    assert asyncio.run(runs()) == [rid]  # nothing of the fork, not even its link
    done = child(None)
    assert done.returncode == 0, done.stderr
    assert sorted(asyncio.run(runs())) == sorted([rid, done.out["run_id"]])


def test_the_cli_forks_and_shows_the_lineage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    url = f"sqlite:///{tmp_path / 'f.db'}"

    async def source() -> str:
        agent = support()
        async with stead.Runtime(url, agents=[agent]) as rt:
            return (await rt.run(await rt.start(agent, "x"))).run_id

    rid = asyncio.run(source())
    assert main(["--store", url, "runs", "fork", rid, "--at-turn", "1", "--input", "y"]) == 0
    fork = capsys.readouterr().out.strip()
    assert main(["--store", url, "runs", "show", fork]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert f"from {rid} after turn 1" in shown and "results carried" in shown
    assert main(["--store", url, "runs", "fork", rid, "--at-turn", "0", "--input", "y"]) == 2
    assert "counts turns from 1" in capsys.readouterr().err
    assert main(["--store", url, "runs", "fork", rid, "--at-turn", "9", "--input", "y"]) == 2
    assert "turns 0 to 3" in capsys.readouterr().err
