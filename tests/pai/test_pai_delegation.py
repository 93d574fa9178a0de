"""Pydantic AI agent delegation under stead: a SteadDurability agent's tool that runs
another SteadDurability agent (``await other.run(prompt, usage=ctx.usage)``) starts a
durable child run of it, in this process: linked to the call, created once, its output
(typed) the tool's, held to the parent's tree budget."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

import stead
from stead.core.children import child_run_id, link_of
from stead.core.states import RunStatus
from stead.pydantic_ai import SteadDurability


class Verdict(BaseModel):
    ok: bool
    note: str


Step = Callable[[list[ModelMessage], AgentInfo], "str | tuple[str, dict[str, Any], str]"]


def _model(step: Step) -> FunctionModel:
    """A streamed model (stead streams every request) whose reply ``step`` picks: text, or
    one tool call (name, arguments, id)."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        got = step(messages, info)
        if isinstance(got, str):
            yield got
            return
        name, args, call_id = got
        delta: DeltaToolCalls = {
            0: DeltaToolCall(name=name, json_args=json.dumps(args), tool_call_id=call_id)
        }
        yield delta

    return FunctionModel(stream_function=stream)


def _researcher() -> Agent[None, Verdict]:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> tuple[str, dict[str, Any], str]:
        (out,) = info.output_tools
        return out.name, {"ok": True, "note": "the tides follow the moon"}, "out_1"

    return Agent(
        _model(answer),
        name="researcher",
        output_type=Verdict,
        capabilities=[SteadDurability()],
    )


def _boss(researcher: Agent[None, Verdict], seen: list[Verdict], budget: Any = None) -> Agent:
    def plan(messages: list[ModelMessage], info: AgentInfo) -> str | tuple[str, Any, str]:
        returned = [
            p
            for m in messages
            for p in getattr(m, "parts", ())
            if getattr(p, "part_kind", "") == "tool-return"
        ]
        if returned:
            return f"Research says: {returned[-1].content}"
        return "research", {"topic": "tides"}, "call_r"

    boss: Agent = Agent(_model(plan), name="boss", capabilities=[SteadDurability(budget=budget)])

    @boss.tool(metadata={"stead": {"effect": "read_only"}})
    async def research(ctx: RunContext[None], topic: str) -> str:
        """Have the researcher look a topic up."""
        result = await researcher.run(f"Research {topic}.", usage=ctx.usage)
        seen.append(result.output)
        return result.output.note

    return boss


async def test_a_delegated_agent_runs_as_a_child_run(tmp_path: Path) -> None:
    researcher, seen = _researcher(), []
    boss = _boss(researcher, seen)
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[boss]) as rt:
        rid = await rt.start(boss, "What moves the tides?")
        view = await rt.run(rid)
        assert view.status is RunStatus.COMPLETED, view.error
        assert view.output == "Research says: the tides follow the moon"
        assert seen == [Verdict(ok=True, note="the tides follow the moon")]  # typed
        child = await rt.state(child_run_id(rid, "call_r", 0))
        assert child.agent == "researcher" and child.input == "Research tides."
        assert child.status is RunStatus.COMPLETED and child.turn_index == 0
        link = link_of(child.config)
        assert link is not None and (link.run_id, link.effect) == (rid, "read_only")
        tree = await rt.tree(rid)
        assert [(d, n.agent) for d, n in tree.walk()] == [(0, "boss"), (1, "researcher")]
        agents = [r.agent for r in await rt.store.list_runs(limit=100)]
        assert sorted(agents) == ["boss", "researcher"]  # one child, created once


async def test_the_parents_budget_covers_the_delegate(tmp_path: Path) -> None:
    """The delegate is held to the parent's budget (its tree's): a budget the parent's
    first turn leaves too little of refuses the child's turn, and the tool reads why."""
    researcher, seen = _researcher(), []
    boss = _boss(researcher, seen, budget=stead.Budget(max_output_tokens=4098))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[boss]) as rt:
        rid = await rt.start(boss, "What moves the tides?")
        await rt.run(rid)
        child = await rt.get(child_run_id(rid, "call_r", 0))
        assert child.status is RunStatus.FAILED and child.error is not None
        assert child.error["code"] == "budget_exceeded"
        assert f"the tree of runs under {rid}" in child.error["message"]
        assert seen == []
        (result,) = [
            e.event for e in await rt.events(rid) if e.event.kind == "tool_result_recorded"
        ]
        assert result.is_error and "ChildRunFailed" in result.content  # type: ignore[attr-defined]
