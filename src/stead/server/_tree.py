"""The run tree route: a run's parent chain and the whole tree of child runs it belongs to
(``stead.agent_tool``, ``ToolContext.run_child``), with each run's state and usage, for
the dashboard's tree section (a person jumps between parent and children from it)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from stead.core.messages import Usage
from stead.core.states import RunStatus
from stead.runtime import RunTree
from stead.server._deps import Caller, Rt, RunPath
from stead.server._models import UsageOut

router = APIRouter()


class TreeNodeOut(BaseModel):
    """One run of a tree and the runs below it."""

    run_id: str
    agent: str
    status: RunStatus
    usage: UsageOut
    """The run's own."""
    tree_usage: UsageOut
    """Its own and every descendant's."""
    children: list[TreeNodeOut] = []
    """The runs its calls started, in the order they started them."""


class RunTreeOut(BaseModel):
    """The tree a run belongs to, drawn from its root."""

    run_id: str
    """The run asked for."""
    parents: list[str]
    """Its parent first, then the parent's parent, up to the root (empty for a root)."""
    root: TreeNodeOut


def _usage(u: Usage) -> UsageOut:
    return UsageOut(**{name: getattr(u, name) for name in UsageOut.model_fields})


def _node(tree: RunTree) -> TreeNodeOut:
    return TreeNodeOut(
        run_id=tree.run_id,
        agent=tree.agent,
        status=tree.status,
        usage=_usage(tree.usage),
        tree_usage=_usage(tree.tree_usage),
        children=[_node(c) for c in tree.children],
    )


@router.get("/runs/{run_id}/tree", response_model=RunTreeOut, tags=["runs"])
async def tree(run_id: RunPath, _: Caller, rt: Rt) -> RunTreeOut:
    """The run's parent chain, and the tree of child runs under its root: every run's
    status, its own usage and its subtree's. A run outside any tree is a root alone."""
    view = await rt.get(run_id)
    root = view.parents[-1] if view.parents else run_id
    return RunTreeOut(run_id=run_id, parents=list(view.parents), root=_node(await rt.tree(root)))
