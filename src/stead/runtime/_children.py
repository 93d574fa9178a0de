"""``Runtime.tree`` and what ``Runtime.get`` adds to a view of a run in a tree of child
runs (``stead.agent_tool``, ``ToolContext.run_child``): its parent chain and its tree's
usage."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from stead.core.children import child_run_id, link_of
from stead.core.fold import RunState
from stead.core.messages import AssistantMessage, Usage
from stead.core.states import RunStatus
from stead.errors import RunNotFound
from stead.runtime.agent import Agent, RunView, checks, takes_id_prefix
from stead.runtime.loop import OwnedRun, children_of
from stead.store import Store

_MAX_CHAIN = 64
"""How far up a parent chain is followed: a link that loops (a hand-made config) stops."""

_PROBE = 500
"""Child ids asked of the store in one read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTree:
    """A run and the child runs below it, as ``Runtime.tree`` reads them."""

    run_id: str
    agent: str
    status: RunStatus
    usage: Usage
    """The run's own usage."""
    tree_usage: Usage
    """Its own and every descendant's."""
    parent: str | None
    """The run that started it (None for a root)."""
    children: tuple[RunTree, ...] = ()
    """The runs its calls started, in the order they started them."""

    def walk(self) -> list[tuple[int, RunTree]]:
        """Every run of the tree with its depth below this one, parents before children."""
        out: list[tuple[int, RunTree]] = [(0, self)]
        for child in self.children:
            out.extend((depth + 1, node) for depth, node in child.walk())
        return out


class Trees:
    """``Runtime.tree``; the parent chain and tree usage of ``Runtime.get``."""

    store: Store
    agents: dict[str, Agent]

    @takes_id_prefix
    async def tree(self, run_id: str) -> RunTree:
        """The run, its children, theirs, ...: statuses and usage, read from the store."""
        checks.identifier("run_id", run_id)
        state, _ = await OwnedRun.load_state(self.store, run_id)
        return await self._tree_of(state)

    async def _tree_of(self, state: RunState) -> RunTree:
        children: list[RunTree] = []
        for child_id in await children_of(self.store, state.run_id):
            try:
                child, _ = await OwnedRun.load_state(self.store, child_id)
            except RunNotFound:
                continue  # its wait was recorded, the run not (yet): nothing to show
            children.append(await self._tree_of(child))
        total = state.usage
        for c in children:
            total = total + c.tree_usage
        link = link_of(state.config)
        assert state.status is not None
        return RunTree(
            run_id=state.run_id,
            agent=state.agent,
            status=state.status,
            usage=state.usage,
            tree_usage=total,
            parent=None if link is None else link.run_id,
            children=tuple(children),
        )

    async def _in_tree(self, view: RunView, state: RunState) -> RunView:
        """``view`` with its whole parent chain, and its tree's usage where its agent can
        start children (an ``agent_tool``) or a handler of its calls started one
        (``ToolContext.run_child``); ``view`` itself for a run outside any tree."""
        agent = self.agents.get(state.agent)
        starts = (agent is not None and agent._parts.children) or await self._handler_children(
            state
        )
        if not view.parents and not starts:
            return view
        chain: list[str] = list(view.parents)
        while chain and len(chain) < _MAX_CHAIN:
            try:
                above, _ = await OwnedRun.load_state(self.store, chain[-1])
            except RunNotFound:
                break
            link = link_of(above.config)
            if link is None or link.run_id in chain:
                break
            chain.append(link.run_id)
        tree = None
        if starts:
            tree = (await self._tree_of(state)).tree_usage
        return dataclasses.replace(view, parents=tuple(chain), tree_usage=tree)

    async def _handler_children(self, state: RunState) -> bool:
        """Whether a handler of one of the run's calls started a child run. A handler's
        first child's id is derived from its call (``child_run_id``, index 0), so one read
        of those ids' rows tells, without reading the run's log."""
        ids = [
            child_run_id(state.run_id, call.id, 0)
            for m in state.messages
            if isinstance(m, AssistantMessage)
            for call in m.tool_calls
        ]
        for i in range(0, len(ids), _PROBE):
            if await self.store.last_seqs(ids[i : i + _PROBE]):
                return True
        return False
