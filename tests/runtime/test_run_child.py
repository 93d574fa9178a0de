"""``ToolContext.run_child``: a tool's handler starts a durable child run and gets its
output. The handler stops at its first ``run_child`` of a child not yet finished, the run
rests while the child works, and the child's end runs the handler again from its top,
where ``run_child`` returns the recorded result. In one process here; the SIGKILL of the
process driving the parent while its child works is at the end."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import _family
import pydantic
import pytest
from _crash_harness import KILLED, Scenario
from _scenario import side_effects

import stead
from _wait import until_async
from stead.core.children import child_run_id, link_of
from stead.core.events import ToolResultRecorded
from stead.core.messages import ToolResultMessage, Usage
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.runtime import Runtime
from stead.testing import Reply, ScriptedModel, assert_valid_history

MATRIX = os.environ.get("STEAD_CHILDREN_MATRIX") == "1"
"""The crash test on PostgreSQL too (``make soak``); SQLite by default."""


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture(params=["sqlite", "postgres"] if MATRIX else ["sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        yield request.getfixturevalue("pg_url")


def _report(request: ModelRequest) -> str:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    return " | ".join(("error: " if r.is_error else "") + r.content for r in results)


def _parent(name: str, tool: stead.Tool, arguments: dict[str, object], **kw: object) -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[(tool.name, arguments)]), _report])
    return stead.Agent(name, model, [tool], **kw)  # type: ignore[arg-type]


def _writer(text: str = "a short note") -> stead.Agent:
    return stead.Agent("writer", ScriptedModel([Reply(text=text)] * 4))


class Summary(pydantic.BaseModel):
    title: str
    words: int


async def _results(rt: Runtime, run_id: str) -> list[ToolResultRecorded]:
    return [e.event for e in await rt.events(run_id) if isinstance(e.event, ToolResultRecorded)]


async def _call_id(rt: Runtime, run_id: str) -> str:
    state = await rt.state(run_id)
    (call_id,) = [m.tool_calls[0].id for m in state.messages if getattr(m, "tool_calls", ())]
    return call_id


async def test_a_handler_gets_its_childs_output_and_the_child_is_linked(store: str) -> None:
    writer = _writer()
    runs: list[int] = []

    @stead.tool(effect="idempotent_write")
    async def draft(topic: str, ctx: stead.ToolContext) -> str:
        """Have a note drafted."""
        runs.append(ctx.attempt)
        note = await ctx.run_child(writer, f"write about {topic}")
        return f"drafted: {note}"

    boss = _parent("boss", draft, {"topic": "tides"})
    async with Runtime(store, agents=[boss]) as rt:
        rid = await rt.start(boss, "go")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED, view.error
        assert view.output == "drafted: a short note"
        call_id = await _call_id(rt, rid)
        child = await rt.state(child_run_id(rid, call_id, 0))
        assert child.agent == "writer" and child.input == "write about tides"
        link = link_of(child.config)
        assert link is not None and (link.run_id, link.tool_call_id, link.index) == (
            rid,
            call_id,
            0,
        )
        assert link.effect == "idempotent_write"  # the class of the tool that started it
        assert len(runs) == 2  # stopped at run_child, then run again by the child's end
        (taken,) = await _results(rt, rid)
        assert taken.content == "drafted: a short note" and not taken.is_error
        assert [r.run_id for r in await rt.store.list_runs(limit=100) if r.agent == "writer"] == [
            child.run_id
        ]
        assert [n.agent for _, n in (await rt.tree(rid)).walk()] == ["boss", "writer"]
        assert (await rt.get(child.run_id)).parents == (rid,)
        assert_valid_history(await rt.state(rid))


async def test_children_one_after_another_and_a_typed_output(store: str) -> None:
    """Two children in one handler: each created once (index 0, then 1), the handler run
    three times; a child with an ``output_type`` gives an instance of it."""
    model = ScriptedModel([Reply(tool_calls=[("final_result", {"title": "Tides", "words": 2})])])
    summarizer = stead.Agent("summarizer", model, output_type=Summary)
    writer = _writer("the moon pulls")
    seen: list[object] = []

    @stead.tool
    async def study(topic: str, ctx: stead.ToolContext) -> str:
        """Study a topic."""
        note = await ctx.run_child(writer, topic)
        summary = await ctx.run_child(summarizer, note)
        seen.append(summary)
        assert isinstance(summary, Summary)
        return f"{note} / {summary.title} ({summary.words})"

    boss = _parent("boss", study, {"topic": "tides"})
    async with Runtime(store, agents=[boss]) as rt:
        rid = await rt.start(boss, "go")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED, view.error
        assert view.output == "the moon pulls / Tides (2)"
        call_id = await _call_id(rt, rid)
        tree = await rt.tree(rid)
        assert [n.run_id for n in tree.children] == [
            child_run_id(rid, call_id, 0),
            child_run_id(rid, call_id, 1),
        ]
        assert [n.agent for n in tree.children] == ["writer", "summarizer"]
        assert seen == [Summary(title="Tides", words=2)]


async def test_a_parent_of_handlers_children_has_its_trees_usage(store: str) -> None:
    """``Runtime.get`` gives a run whose handlers started children (its agent has no
    ``agent_tool``) its tree's usage, as ``Runtime.tree`` reads it; a run whose handler
    started none has none, as any run outside a tree."""
    writer = stead.Agent(
        "writer",
        ScriptedModel([Reply(text="a note", usage=Usage(input_tokens=7, output_tokens=5))]),
    )

    @stead.tool
    async def study(topic: str, ctx: stead.ToolContext) -> str:
        """Study a topic."""
        if topic == "alone":
            return "nothing to write"
        first = await ctx.run_child(writer, topic)
        second = await ctx.run_child(writer, first)
        return f"{first} / {second}"

    boss = _parent("boss", study, {"topic": "tides"})
    loner = _parent("loner", study, {"topic": "alone"})
    async with Runtime(store, agents=[boss, loner]) as rt:
        done = await rt.run(await rt.start(boss, "go"))
        assert done.status is RunStatus.COMPLETED, done.error
        view = await rt.get(done.run_id)
        tree = await rt.tree(done.run_id)
        assert len(tree.children) == 2
        assert view.tree_usage == tree.tree_usage
        assert view.tree_usage == view.usage + Usage(input_tokens=14, output_tokens=10)
        alone = await rt.run(await rt.start(loner, "go"))
        assert alone.status is RunStatus.COMPLETED and alone.tree_usage is None
        assert (await rt.get(alone.run_id)).tree_usage is None


async def test_a_failed_child_raises_in_the_handler_and_uncaught_is_an_error_result(
    store: str,
) -> None:
    failing = stead.Agent(
        "failing", ScriptedModel([Reply(text="x")]), budget=stead.Budget(max_total_tokens=1)
    )
    caught: list[str] = []

    @stead.tool
    async def careful(ctx: stead.ToolContext) -> str:
        """Try, and say how it went."""
        try:
            return str(await ctx.run_child(failing, "try"))
        except stead.ChildRunFailed as exc:
            caught.append(exc.child_run)
            raise

    boss = _parent("boss", careful, {})
    async with Runtime(store, agents=[boss]) as rt:
        rid = await rt.start(boss, "go")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED, view.error
        (result,) = await _results(rt, rid)
        assert result.is_error and "ChildRunFailed" in result.content
        assert "failed" in result.content and "budget" in result.content
        assert caught == [child_run_id(rid, await _call_id(rt, rid), 0)]


async def test_a_handler_must_start_the_same_children(store: str) -> None:
    """A handler that asks for another agent on its rerun than the child recorded at that
    place is told so (the model reads it); no second child is made."""
    writer, other = _writer(), stead.Agent("other", ScriptedModel(["no"]))
    picks = iter([writer, other])

    @stead.tool
    async def fickle(ctx: stead.ToolContext) -> str:
        """Change its mind."""
        return str(await ctx.run_child(next(picks), "write"))

    boss = _parent("boss", fickle, {})
    async with Runtime(store, agents=[boss, other]) as rt:
        rid = await rt.start(boss, "go")
        assert (await rt.run(rid)).status is RunStatus.COMPLETED
        (result,) = await _results(rt, rid)
        assert result.is_error and "same children in the same order" in result.content
        assert not any(r.agent == "other" for r in await rt.store.list_runs(limit=100))


async def test_caller_mistakes_and_the_depth_limit_are_errors_the_model_reads(
    store: str,
) -> None:
    writer = _writer()

    @stead.tool
    async def deep(ctx: stead.ToolContext) -> str:
        """Delegate."""
        return str(await ctx.run_child(writer, "write"))

    @stead.tool
    async def wrong(ctx: stead.ToolContext) -> str:
        """Delegate to what is not an agent."""
        return str(await ctx.run_child("writer", "write"))

    shallow = _parent("shallow", deep, {}, limits=stead.Limits(max_depth=0))
    confused = _parent("confused", wrong, {})
    async with Runtime(store, agents=[shallow, confused]) as rt:
        for agent, expected in ((shallow, "Limits.max_depth"), (confused, "takes a stead.Agent")):
            rid = await rt.start(agent, "go")
            assert (await rt.run(rid)).status is RunStatus.COMPLETED
            (result,) = await _results(rt, rid)
            assert result.is_error and expected in result.content, result.content
        assert not any(r.agent == "writer" for r in await rt.store.list_runs(limit=100))

    # Outside a drive (a context made by hand), there is no run to hang a child on.
    ctx = stead.ToolContext(
        run_id="run_x",
        tool_call_id="c1",
        turn_index=0,
        idempotency_key="k",
        attempt=1,
        tool_name="deep",
        signal=stead.AbortSignal(),
    )
    with pytest.raises(stead.UserError, match="can only be started there"):
        await ctx.run_child(writer, "write")


@pytest.mark.timeout(120)
async def test_the_process_driving_a_parent_killed_while_its_handlers_child_works(
    url: str, scenario: Scenario, tmp_path: Path
) -> None:
    """``stead run`` drives ``foreman`` to its wait (its handler's ``run_child``), then the
    child, in one process: SIGKILLed while the child's tool works. A ``Runtime.run`` of the
    parent here takes the child over (its owner is dead), finishes it, and the handler runs
    again and takes the child's result: one child, one result."""
    env = scenario.env(STEAD_TEST_SLOW="600", STEAD_TEST_SLOW_GATE=str(tmp_path / "never"))
    running = _family_run(url, env)
    try:

        async def working() -> bool:
            return side_effects().count("slow_lookup") == 1

        await until_async(working, "the child's tool to start")
    finally:
        running.kill()
        running.wait()
    async with Runtime(url, agents=_family.agents()) as rt:
        (rid,) = [r.run_id for r in await rt.store.list_runs(limit=100) if r.agent == "foreman"]
        (pending,) = (await rt.get(rid)).approvals
        assert pending.reason == "child" and pending.payload["index"] == 0
        child = pending.payload["child_run"]
        assert (await rt.get(child)).status is RunStatus.AWAITING_TOOL
        assert side_effects().count("delegate") == 1

        gate = tmp_path / "never"
        gate.touch()  # the child's tool, run again, returns at once
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED, view.error
        assert view.output == "plodder said: Looked."
        assert [r.run_id for r in await rt.store.list_runs(limit=100) if r.agent == "plodder"] == [
            child
        ]
        (taken,) = await _results(rt, rid)
        assert taken.content == "plodder said: Looked." and not taken.is_error
        assert side_effects().count("delegate") == 2  # stopped at run_child, then run again
        for run in (rid, child):
            assert_valid_history(await rt.state(run))


@pytest.mark.timeout(120)
async def test_killed_between_creating_the_child_and_recording_the_wait(
    url: str, scenario: Scenario, tmp_path: Path
) -> None:
    """SIGKILLed right after the handler's child was created, before the call's wait was
    recorded: the call runs again (``idempotent_write``), its ``run_child`` finds the same
    child (never a second one) and waits on it, and the run completes with one result."""
    env = scenario.env("after_child_created:delegate", STEAD_TEST_SLOW="0")
    dying = _family_run(url, env)
    assert await asyncio.to_thread(dying.wait, 60) == KILLED
    async with Runtime(url, agents=_family.agents()) as rt:
        (rid,) = [r.run_id for r in await rt.store.list_runs(limit=100) if r.agent == "foreman"]
        (child,) = [r.run_id for r in await rt.store.list_runs(limit=100) if r.agent == "plodder"]
        assert (await rt.get(rid)).approvals == ()  # the wait was never recorded
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED, view.error
        assert view.output == "plodder said: Looked."
        plodders = [r.run_id for r in await rt.store.list_runs(limit=100) if r.agent == "plodder"]
        assert plodders == [child] == [child_run_id(rid, await _call_id(rt, rid), 0)]
        (taken,) = await _results(rt, rid)
        assert taken.content == "plodder said: Looked." and not taken.is_error
        assert side_effects().count("slow_lookup") == 1
        for run in (rid, child):
            assert_valid_history(await rt.state(run))


def _family_run(url: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    stead_bin = shutil.which("stead", path=str(Path(sys.executable).parent))
    assert stead_bin is not None
    return subprocess.Popen(
        [stead_bin, "--store", url, "run", "_family:foreman", "look order 7 up"],
        cwd=Path(__file__).parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
