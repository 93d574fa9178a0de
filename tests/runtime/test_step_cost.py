"""What a run costs that it need not: work done once per agent, or once per call, instead of
once per run or twice per call (issue 15, "less CPU per step"). Counted, never timed."""

from __future__ import annotations

from pathlib import Path

import stead
from stead.core.messages import ToolSchema
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.testing import Reply, ScriptedModel


@stead.tool(effect="read_only")
def look(what: str) -> str:
    """Look at something."""
    return f"saw {what}"


async def test_the_runs_of_an_agent_share_its_tool_schemas(tmp_path: Path) -> None:
    """The schemas a model request carries (a deep copy of each tool's JSON schema) and the
    specs the core decides with are worked out at the agent's first run, not at every run."""
    sent: list[tuple[ToolSchema, ...]] = []

    def call(request: ModelRequest) -> Reply:
        sent.append(request.tools)
        return Reply(tool_calls=[("look", {"what": "x"})])

    def answer(request: ModelRequest) -> str:
        sent.append(request.tools)
        return "done"

    agent = stead.Agent("shared", ScriptedModel([call, answer, call, answer]), [look])
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent]) as rt:
        for _ in range(2):
            view = await rt.run(await rt.start(agent, "go"))
            assert view.status is RunStatus.COMPLETED
    assert [t.name for t in sent[0]] == ["look"]
    assert all(tools is sent[0] for tools in sent)  # one tuple: no copy per run
