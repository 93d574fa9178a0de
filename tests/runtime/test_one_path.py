"""One path: crash points are an injected hook on the code production runs, appends from
outside the owner go through the owner's session code, and only ``core/builders`` makes
events."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

import stead
import stead.core.events as events_module
from stead import _crash
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.testing import Reply, ScriptedModel

RUNTIME = Path(stead.__file__).parent / "runtime"


@stead.tool(effect="non_idempotent")
def send(to: str) -> str:
    """Send a message (no reconcile function: its start is a commit of its own)."""
    return f"sent to {to}"


@stead.tool(effect="read_only", requires_approval=True)
def peek(what: str) -> str:
    """Look at something a person must allow."""
    return f"saw {what}"


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.mark.parametrize("armed", [False, True])
async def test_the_model_call_runs_in_the_drive_task_armed_or_not(store: str, armed: bool) -> None:
    """Armed, the loop used to run the model call as a task of its own (so the crash point
    could fire mid-call): the path under test differed from production's."""
    tasks: list[asyncio.Task[object] | None] = []

    def reply(_: ModelRequest) -> str:
        tasks.append(asyncio.current_task())
        return "done"

    agent = stead.Agent("one", ScriptedModel([reply]), [])
    if armed:
        _crash.arm("after_tool_effect", tool="no_such_tool")  # armed, never reached
    try:
        async with stead.Runtime(store, agents=[agent]) as rt:
            view = await rt.run(await rt.start(agent, "hi"))
    finally:
        _crash.disarm()
    assert view.status is RunStatus.COMPLETED
    assert tasks == [asyncio.current_task()]


async def test_an_injected_crash_hook_sees_every_point_a_run_reaches(store: str) -> None:
    seen: list[tuple[str, str | None]] = []

    def hook(point: str, tool: str | None) -> None:
        assert point in _crash.POINTS
        seen.append((point, tool))

    model = ScriptedModel(
        [Reply(tool_calls=[("send", {"to": "ops"})]), Reply(tool_calls=[("peek", {"what": "x"})])]
    )
    agent = stead.Agent("hooked", model, [send, peek])
    async with stead.Runtime(store, agents=[agent], crash=hook) as rt:
        rid = await rt.start(agent, "go")
        view = await rt.run(rid)
        assert view.status is RunStatus.AWAITING_APPROVAL
        assert seen == [
            ("mid_model_call", None),
            ("after_intent", None),
            ("after_tool_started", "send"),
            ("after_tool_effect", "send"),
            ("after_result_commit", "send"),
            ("mid_model_call", None),
            ("after_intent", None),
        ]
        seen.clear()
        await rt.approve(rid, view.approvals[0].tool_call_id, token=view.approvals[0].token)
        assert seen == [("after_approval_commit", None)]
        seen.clear()
        rid2 = await rt.start(agent, "again")
        await rt.cancel(rid2)  # nobody drives it: this process takes the lease and ends it
        assert seen == []


async def test_a_decision_is_appended_by_the_session_code_snapshot_included(store: str) -> None:
    """External appends used to be a second copy of the append: among what it lacked, the
    session's snapshot policy. Now a decision that makes a snapshot due writes one."""
    model = ScriptedModel([Reply(tool_calls=[("peek", {"what": "x"})]), "ok"])
    agent = stead.Agent("gated", model, [peek])
    async with stead.Runtime(store, agents=[agent], snapshot_every=1) as rt:
        rid = await rt.start(agent, "go")
        view = await rt.run(rid)
        (pending,) = view.approvals
        decided = await rt.approve(rid, pending.tool_call_id, token=pending.token)
        loaded = await rt.store.load(rid)
        assert loaded.snapshot_seq == decided.seq
        assert (await rt.run(rid)).status is RunStatus.COMPLETED


def test_only_core_builders_construct_events_in_the_runtime() -> None:
    kinds = {
        name
        for name, value in vars(events_module).items()
        if isinstance(value, type) and isinstance(getattr(value, "kind", None), str)
    }
    made = []
    for path in sorted(RUNTIME.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            name = (
                node.func.id
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                else ""
            )
            if name in kinds:
                made.append(f"{path.name}:{node.lineno} {name}")
    assert made == []


def test_the_runtime_has_no_crash_branches_and_no_file_over_600_lines() -> None:
    for path in sorted(RUNTIME.glob("*.py")):
        text = path.read_text()
        assert "_crash.armed" not in text, path.name
        assert "_crash.point(" not in text.replace("crash: CrashHook = _crash.point", ""), path.name
        assert len(text.splitlines()) < 600, path.name


def test_run_failed_phase_is_the_literal_of_the_phases_written() -> None:
    from typing import get_args, get_type_hints

    from stead.core.events import RunFailed
    from stead.core.failures import FailurePhase

    assert get_args(get_type_hints(RunFailed)["phase"]) == get_args(FailurePhase)
    assert set(get_args(FailurePhase)) == {"model", "runtime"}
