"""Tracing wraps the drive's executor: what the runtime asks of its executor beyond the
port's methods (the Runtime's ``deps`` for a question's or a reconcile function's context; a
pool's ``acknowledge``, ``recorded``, ``recover``, ``authoritative``) still reaches it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from test_tracing import Traced

import stead
from stead.testing import Reply, ScriptedModel


@dataclass
class Site:
    name: str = "north warehouse"


@stead.tool(asks=str)
def confirm_shipping(order_id: int, ctx: stead.ToolContext[Site]) -> str:
    """Ask a person where to ship from (worded with the worker's deps)."""
    return f"Ship order {order_id} from the {ctx.deps.name}?"


async def test_a_traced_run_gives_its_question_the_runtimes_deps(tmp_path: Path) -> None:
    model = ScriptedModel([Reply(tool_calls=[("confirm_shipping", {"order_id": 7})]), "ok"])
    agent = stead.Agent("shipping", model, [confirm_shipping], deps_type=Site)
    traced = Traced()
    async with stead.Runtime(
        tmp_path / "r.db", agents=[agent], deps=Site(), observers=[traced.tracing]
    ) as rt:
        view = await rt.run(await rt.start(agent, "ship order 7"))
    assert len(view.approvals) == 1, view
    [question] = view.approvals
    assert question.payload["question"] == "Ship order 7 from the north warehouse?"
