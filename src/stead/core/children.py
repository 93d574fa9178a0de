"""Child runs: a tool call whose work is a run of another agent (``stead.agent_tool``), or
whose handler starts runs of other agents (``ToolContext.run_child``).

The decisions, pure: the child's id (derived from the call, so a crash between creating the
child and recording the wait finds the same child, never a second one), the link a child
carries in its config, the wait the parent's call records (``approval_requested`` with
``reason="child"``: the parent rests as it does on a person, its worker free, its
deadlines and sweeps the same), the result a finished child gives that call, the depth
limit, and the budget a child may spend of its tree's.

The two differ in how a child's end is taken. An ``agent_tool`` call's child gives the call
its result (``tool_result_recorded``, ``source="child"``). A handler's child (its wait's
payload has the child's ``index``) gives the call ``approve``: the handler runs again, and
its ``run_child`` reads the finished child from the child run itself.

Linked both ways without a new event: the child's ``run_created`` config holds its parent
(run, call, depth, root); the parent's wait names the child in its payload.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

from stead.core.events import ApprovalDecided, ApprovalRequested, Event, ToolResultRecorded
from stead.core.fold import CallState, RunState
from stead.core.limits import Budget
from stead.core.messages import Usage
from stead.core.states import RunStatus

PARENT_KEY: Final = "parent"
"""The key of a child's link in its ``run_created`` config."""

CHILD_REASON: Final = "child"
"""``ApprovalRequested.reason`` of a call that waits on a child run."""


def child_run_id(run_id: str, tool_call_id: str, index: int | None = None) -> str:
    """The id of the child a call starts: the same for every attempt of the call and in every
    process, so the child is created at most once per call. ``index``: the child's place
    among those a tool's handler starts with ``ToolContext.run_child`` (0, 1, ...); None
    for an ``agent_tool`` call, whose one child is the call's work."""
    text = f"child\x00{run_id}\x00{tool_call_id}"
    if index is not None:
        text += f"\x00{index}"
    return "run_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A child's parent, as its config records it."""

    run_id: str
    tool_call_id: str
    depth: int
    """1 for a child of a root run, 2 for a grandchild, ..."""
    root: str
    """The run at the top of the tree."""
    effect: str = ""
    """The effect class of the tool call that started the child."""
    budget: dict[str, Any] | None = None
    """The tree's budget (``Budget.to_json``), where the root has one."""
    spent_before: dict[str, Any] | None = None
    """What the rest of the tree had spent (``Usage.to_json``) when this child started."""
    index: int | None = None
    """Its place among the children a handler started (``ToolContext.run_child``); None for
    an ``agent_tool`` call's child."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "depth": self.depth,
            "root": self.root,
            "effect": self.effect,
        }
        if self.index is not None:
            data["index"] = self.index
        if self.budget is not None:
            data["budget"] = self.budget
            data["spent_before"] = self.spent_before or {}
        return data


def link_of(config: dict[str, Any] | None) -> Link | None:
    """The parent link in a run's config, or None for a root run. A link that is not the
    shape this code writes is read as none (a hand-made config names no parent)."""
    raw = (config or {}).get(PARENT_KEY)
    if not isinstance(raw, dict):
        return None
    run_id, call_id, depth = raw.get("run_id"), raw.get("tool_call_id"), raw.get("depth")
    if not isinstance(run_id, str) or not isinstance(call_id, str) or not isinstance(depth, int):
        return None
    budget = raw.get("budget")
    spent = raw.get("spent_before")
    index = raw.get("index")
    return Link(
        run_id=run_id,
        tool_call_id=call_id,
        depth=depth,
        root=str(raw.get("root") or run_id),
        effect=str(raw.get("effect") or ""),
        budget=budget if isinstance(budget, dict) else None,
        spent_before=spent if isinstance(spent, dict) else None,
        index=index if isinstance(index, int) and not isinstance(index, bool) else None,
    )


def depth_of(state: RunState) -> int:
    link = link_of(state.config)
    return 0 if link is None else link.depth


def child_link(
    state: RunState,
    call: CallState,
    budget: Budget,
    tree_spent: Usage,
    index: int | None = None,
) -> Link:
    """The link of the child ``call`` of ``state`` starts. ``budget`` is the parent's own
    budget, ``tree_spent`` what its tree has spent so far: the child inherits the tighter
    of the parent's own budget and the one the parent inherited, and what was spent
    against that one."""
    parent = link_of(state.config)
    inherited = None if parent is None else parent.budget
    if inherited is not None:
        assert parent is not None
        tree_budget: dict[str, Any] | None = inherited
        before = Usage.from_json(parent.spent_before or {}) + state.usage + tree_spent
    elif not budget.unlimited:
        tree_budget, before = budget.to_json(), state.usage + tree_spent
    else:
        tree_budget, before = None, Usage()
    return Link(
        run_id=state.run_id,
        tool_call_id=call.tool_call_id,
        depth=depth_of(state) + 1,
        root=state.run_id if parent is None else parent.root,
        effect=call.effect_class or "",
        budget=tree_budget,
        spent_before=None if tree_budget is None else before.to_json(),
        index=index,
    )


def depth_refusal(state: RunState, max_depth: int) -> str | None:
    """Why a call of ``state`` may not start a child (the result the model reads), or None."""
    depth = depth_of(state) + 1
    if depth <= max_depth:
        return None
    return (
        f"refused: a child run here would be {depth} levels deep, and this tree allows "
        f"{max_depth} (Limits.max_depth); do the work here instead of delegating it"
    )


def child_wait_events(
    call: CallState, child_id: str, agent: str, input: str, token: str, index: int | None = None
) -> list[Event]:
    """The parent's call waits on its child (no deadline of its own: the child's limits
    bound it, and a child that times out ends the wait). ``index``: a child its handler
    started (``ToolContext.run_child``), whose end runs the handler again."""
    payload: dict[str, Any] = {
        "tool": call.name,
        "child_run": child_id,
        "agent": agent,
        "input": input,
    }
    if index is not None:
        payload["index"] = index
    return [
        ApprovalRequested(
            turn_index=call.turn_index,
            tool_call_id=call.tool_call_id,
            reason=CHILD_REASON,
            payload=payload,
            token=token,
        )
    ]


def waiting_children(state: RunState) -> dict[str, str]:
    """The calls of ``state`` that wait on a child: call id -> child run id."""
    out: dict[str, str] = {}
    for call_id, pending in state.approvals.items():
        if pending.reason == CHILD_REASON:
            child = (pending.payload or {}).get("child_run")
            if isinstance(child, str):
                out[call_id] = child
    return out


def child_result(child: RunState) -> tuple[str, bool] | None:
    """What a finished child gives its parent's call (content, is_error); None while it is
    not finished. Its output when it completed (the structured output's JSON when it has
    one); otherwise an error the parent's model reads, naming the child and why."""
    status = child.status
    if status is RunStatus.COMPLETED:
        return child.output or "", False
    if status in (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.TIMED_OUT):
        why = (child.error or {}).get("message") or status.value
        return f"the child run {child.run_id} ({child.agent}) {status.value}: {why}", True
    return None


def child_settled_events(parent: RunState, child: RunState) -> list[Event]:
    """The events that end the parent's wait on ``child``; none when the parent no longer
    waits on it (already given the result, cancelled, or the child is not finished): so a
    delivery repeated after a crash, or by a sweep, writes nothing."""
    link = link_of(child.config)
    settled = child_result(child)
    if link is None or settled is None or link.run_id != parent.run_id:
        return []
    if parent.status is not RunStatus.AWAITING_APPROVAL:
        return []
    if waiting_children(parent).get(link.tool_call_id) != child.run_id:
        return []
    call = parent.calls[link.tool_call_id]
    content, is_error = settled
    if "index" in (parent.approvals[call.tool_call_id].payload or {}):
        # A child the handler started: its end runs the handler again, and there
        # ``run_child`` reads the child's result from the child run itself.
        by = f"child run {child.run_id}"
        decided = ApprovalDecided(
            turn_index=call.turn_index, tool_call_id=call.tool_call_id, decision="approve", by=by
        )
        return [decided]
    return [
        ApprovalDecided(
            turn_index=call.turn_index,
            tool_call_id=call.tool_call_id,
            decision="deny" if is_error else "answer",
            by=f"child run {child.run_id}",
            reason=content if is_error else "",
        ),
        ToolResultRecorded(
            turn_index=call.turn_index,
            tool_call_id=call.tool_call_id,
            name=call.name,
            content=content,
            is_error=is_error,
            source="child",
            attempt=call.attempts,
        ),
    ]


def tree_budget_of(state: RunState) -> tuple[Budget, Usage] | None:
    """The budget of the tree a child belongs to and what the rest of the tree had spent
    when it started; None for a root run or a tree without a budget."""
    link = link_of(state.config)
    if link is None or link.budget is None:
        return None
    return Budget.from_json(link.budget), Usage.from_json(link.spent_before or {})
