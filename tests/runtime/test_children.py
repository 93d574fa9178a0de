"""Child runs in one process (``stead.agent_tool``): linked both ways, created once per call,
the parent resting while its child runs, the child's output (or its failure, as an error the
model reads) the call's result, depth and tree budgets, cancel down the tree."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

import stead
from stead.core.children import child_run_id, link_of
from stead.core.messages import ToolResultMessage
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.testing import Reply, ScriptedModel, assert_valid_history


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def _last_result(request: ModelRequest) -> str:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    last = results[-1]
    return f"{'error' if last.is_error else 'got'}: {last.content}"


class Summary(pydantic.BaseModel):
    title: str
    words: int


def _writer() -> stead.Agent:
    model = ScriptedModel([Reply(text="a short note")])
    return stead.Agent("writer", model)


def _boss(child: stead.Agent, **kw: object) -> stead.Agent:
    model = ScriptedModel(
        [Reply(tool_calls=[(child.name, {"task": "write the note"})]), _last_result]
    )
    return stead.Agent("boss", model, [stead.agent_tool(child)], **kw)  # type: ignore[arg-type]


async def test_a_child_run_is_linked_both_ways_and_its_output_is_the_result(store: str) -> None:
    writer = _writer()
    boss = _boss(writer)
    async with stead.Runtime(store, agents=[boss]) as rt:
        assert "writer" in rt.agents  # the parent's worker drives its children
        rid = await rt.start(boss, "go")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED, view.error
        assert view.output == "got: a short note"
        state = await rt.state(rid)
        (call_id,) = [m.tool_calls[0].id for m in state.messages if getattr(m, "tool_calls", ())]
        child = await rt.state(child_run_id(rid, call_id))
        assert child.agent == "writer" and child.input == "write the note"
        link = link_of(child.config)
        assert link is not None and (link.run_id, link.tool_call_id) == (rid, call_id)
        assert link.depth == 1 and link.root == rid and link.effect == "read_only"
        assert child.status is RunStatus.COMPLETED
        assert_valid_history(state)


async def test_the_parent_rests_while_its_child_is_queued(store: str) -> None:
    """A worker that claims the parent gives it up once the call waits: its slot is free."""
    writer = _writer()
    boss = _boss(writer)
    async with stead.Runtime(store, agents=[boss]) as rt:
        rid = await rt.start(boss, "go")
        # driven as a worker drives (with a claim), the parent's run returns at the wait
        claims = await rt.store.claim_next(
            owner=rt.owner, now=rt.clock(), ttl=30, limit=1, agents=["boss"]
        )
        (c,) = claims
        view = await rt.run(rid, claim=c)
        assert view.status is RunStatus.AWAITING_APPROVAL
        (pending,) = view.approvals
        assert pending.reason == "child"
        child_id = pending.payload["child_run"]
        assert (await rt.get(child_id)).status is RunStatus.QUEUED
        with pytest.raises(stead.ApprovalError, match="child run's end"):
            await rt.approve(rid, pending.tool_call_id)
        with pytest.raises(stead.ApprovalError):
            await rt.answer(rid, pending.tool_call_id, "forged")
        await rt.run(child_id)  # the child's end wakes the parent: claimable again
        assert (await rt.get(rid)).status is RunStatus.AWAITING_TOOL
        done = await rt.run(rid)
        assert done.status is RunStatus.COMPLETED and done.output == "got: a short note"


async def test_a_typed_child_gives_its_structured_output(store: str) -> None:
    model = ScriptedModel([Reply(tool_calls=[("final_result", {"title": "Note", "words": 3})])])
    summarizer = stead.Agent("summarizer", model, output_type=Summary)
    boss = _boss(summarizer)
    async with stead.Runtime(store, agents=[boss]) as rt:
        view = await rt.run(await rt.start(boss, "go"))
        assert view.status is RunStatus.COMPLETED, view.error
        got = view.output or ""
        assert got.startswith("got: ")
        assert json.loads(got.removeprefix("got: ")) == {"title": "Note", "words": 3}


async def test_a_failed_child_is_an_error_result_the_parent_reads(store: str) -> None:
    failing = stead.Agent(
        "failing", ScriptedModel([Reply(text="x")]), budget=stead.Budget(max_total_tokens=1)
    )
    boss = _boss(failing)
    async with stead.Runtime(store, agents=[boss]) as rt:
        view = await rt.run(await rt.start(boss, "go"))
        assert view.status is RunStatus.COMPLETED
        assert view.output is not None and view.output.startswith("error: the child run")
        assert "failed" in view.output and "budget" in view.output


def _delegating(name: str, child: stead.Agent | None, max_depth: int = 2) -> stead.Agent:
    """An agent whose first turn hands the task on to ``child`` (or answers, without one)
    and whose next turn reports what it got."""

    def step(request: ModelRequest) -> Reply:
        if child is None:
            return Reply(text=f"{name} did it")
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return Reply(text=f"{name} {_last_result(request)}")
        return Reply(tool_calls=[(child.name, {"task": "go deeper"})])

    tools = [stead.agent_tool(child)] if child is not None else []
    return stead.Agent(
        name, ScriptedModel([step] * 2), tools, limits=stead.Limits(max_depth=max_depth)
    )


async def test_depth_is_limited(store: str) -> None:
    """root -> a -> b -> c with a depth limit of 2: b's call is refused (c would be three
    levels deep), as an error result b's model reads; the tree unwinds and completes."""
    c = _delegating("c", None)
    b = _delegating("b", c)
    a = _delegating("a", b)
    root = _delegating("root", a)
    async with stead.Runtime(store, agents=[root]) as rt:
        view = await rt.run(await rt.start(root, "go"))
        assert view.status is RunStatus.COMPLETED, view.error
        assert view.output is not None
        assert "root got: a got: b error: refused: a child run here would be 3 levels" in (
            view.output
        )
        assert not any(r.agent == "c" for r in await rt.store.list_runs(limit=100))


async def test_a_tree_budget_runs_out_in_a_grandchild(store: str) -> None:
    """The root's budget covers its tree: each run's usage counts against it as it happens,
    so the grandchild's second turn, which the tree cannot pay for, never starts; its
    failure is an error its parent reads, and the parent, with its child's usage counted,
    cannot pay for its next turn either."""
    c = _delegating("c", None, max_depth=3)
    b = _delegating("b", c, max_depth=3)
    a = _delegating("a", b, max_depth=3)
    model = ScriptedModel(
        [Reply(tool_calls=[("a", {"task": "go deeper"})]), lambda r: _last_result(r)]
    )
    root = stead.Agent(
        "root",
        model,
        [stead.agent_tool(a)],
        budget=stead.Budget(max_input_tokens=60),
        limits=stead.Limits(max_depth=3),
    )
    async with stead.Runtime(store, agents=[root]) as rt:
        rid = await rt.start(root, "go")
        view = await rt.run(rid)
        tree = await rt.tree(rid)
        runs = {node.agent: node for _, node in tree.walk()}
        assert [(d, n.agent) for d, n in tree.walk()] == [(0, "root"), (1, "a"), (2, "b"), (3, "c")]
        assert runs["c"].status is RunStatus.COMPLETED
        b_run = await rt.get(runs["b"].run_id)
        assert b_run.status is RunStatus.FAILED
        paid = [t.turn_index for t in b_run.turn_usage if t.usage.total_tokens]
        assert paid == [0]  # its second turn was refused before the model was called
        assert b_run.error is not None and b_run.error["code"] == "budget_exceeded"
        assert f"the tree of runs under {rid}" in b_run.error["message"]
        assert b_run.parents == (runs["a"].run_id, rid)
        assert view.status is RunStatus.FAILED and view.error is not None
        assert view.error["code"] == "budget_exceeded"
        whole = await rt.get(rid)
        assert whole.tree_usage == tree.tree_usage
        assert whole.usage == tree.usage and whole.usage.input_tokens < tree.tree_usage.input_tokens
        assert tree.tree_usage.input_tokens <= 60  # what the tree spent stayed in its budget


async def test_children_side_by_side_cannot_overspend_the_tree_budget(store: str) -> None:
    """Two children started by one turn share the root's budget: the second one, whose link
    took its snapshot of the tree before the first had spent anything, still sees what its
    sibling spent at its own turn's start and is refused; the tree stays within budget
    (with only the snapshot, both ran and the tree spent 80 of 60 output tokens)."""
    helper = stead.Agent(
        "helper", ScriptedModel([Reply(text="done and dusted " * 8)] * 2), max_output_tokens=20
    )
    model = ScriptedModel(
        [
            Reply(tool_calls=[("helper", {"task": "part one"}), ("helper", {"task": "part two"})]),
            _last_result,
        ]
    )
    root = stead.Agent(
        "root",
        model,
        [stead.agent_tool(helper)],
        max_output_tokens=20,
        budget=stead.Budget(max_output_tokens=60),
    )
    async with stead.Runtime(store, agents=[root]) as rt:
        rid = await rt.start(root, "go")
        await rt.run(rid)
        tree = await rt.tree(rid)
        first, second = tree.children
        assert first.status is RunStatus.COMPLETED
        assert second.status is RunStatus.FAILED and second.usage.output_tokens == 0
        refused = (await rt.get(second.run_id)).error
        assert refused is not None and refused["code"] == "budget_exceeded"
        assert f"the tree of runs under {rid}" in refused["message"]
        assert tree.tree_usage.output_tokens <= 60
