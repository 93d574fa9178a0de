"""What an operator's screen asks of the runs: find runs (by text, time, status, agent),
read a run as steps (a compact timeline), and whether resuming a run can succeed."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from stead.core.budget import budget_breach
from stead.core.fold import RunState
from stead.core.states import RESUMABLE, RunStatus
from stead.errors import CorruptEvent, IllegalTransition, UserError
from stead.runtime._steps import RunSteps, steps_of
from stead.runtime.agent import Agent, takes_id_prefix
from stead.store import RunQuery, RunRecord, RunSearch, Store, StoredEvent

SEARCH_TEXT = 20_000
"""How many characters of a run's input and of its output a search looks at."""
_BATCH = 200


def search_text(state: RunState) -> str:
    """What a search matches a word against: the run's input and output, lowercased."""
    parts = [state.input[:SEARCH_TEXT], (state.output or "")[:SEARCH_TEXT]]
    if state.data is not None:
        parts.append(json.dumps(state.data, ensure_ascii=False)[:SEARCH_TEXT])
    return "\n".join(parts).lower()


def resume_refusal(state: RunState, agents: Mapping[str, Agent]) -> str | None:
    """Why resuming the run cannot succeed now, in words; None when it can."""
    status = state.status
    if status is RunStatus.COMPLETED:
        return "it is completed"
    if status is RunStatus.AWAITING_APPROVAL:
        return "it waits on a person: answer or decide its pending calls"
    if status not in RESUMABLE:
        return "it is not stopped: a worker drives it"
    code = (state.error or {}).get("code")
    if code == "budget_exceeded":
        agent = agents.get(state.agent)
        if agent is None:
            return "it spent its budget, and this server does not have its agent to check anew"
        price = agent.prices.get(agent.model.model_name)
        if budget_breach(state.usage, 1, 1, agent.budget, price) is not None:
            return (
                "it spent its budget: it would fail again at once; give the agent a larger "
                "budget first"
            )
    return None


class Finding:
    """``Runtime.find_runs``, ``Runtime.steps`` and ``Runtime.resume_refusal``."""

    store: Store
    agents: dict[str, Agent]
    clock: Callable[[], float]

    if TYPE_CHECKING:

        async def state(self, run_id: str) -> RunState: ...

        async def events(self, run_id: str, after: int = 0) -> list[StoredEvent]: ...

    def _search(self) -> RunSearch:
        if not isinstance(self.store, RunSearch):
            raise UserError(f"this store ({type(self.store).__name__}) cannot search runs")
        return self.store

    async def find_runs(self, query: RunQuery) -> list[RunRecord]:
        """The runs ``query`` matches, most recently updated first. A query with text first
        brings the search rows of runs changed since they were written up to date."""
        if query.limit < 1:
            raise UserError("limit must be at least 1")
        store = self._search()
        if query.text.strip():
            await self.update_search()
        return await store.find_runs(query)

    async def update_search(self) -> int:
        """Write the search rows of every run changed since its row was written; how many.
        A run that changes meanwhile is written again by the next search."""
        store = self._search()
        done: set[str] = set()
        while True:
            stale = [(r, at) for r, at in await store.stale_search_rows(_BATCH) if r not in done]
            if not stale:
                return len(done)
            rows = []
            for run_id, updated_at in stale:
                try:
                    text = search_text(await self.state(run_id))
                except (CorruptEvent, IllegalTransition):
                    text = ""  # a damaged log: found by its id and conversation only
                rows.append((run_id, updated_at, text))
                done.add(run_id)
            await store.put_search_rows(rows)

    @takes_id_prefix
    async def steps(self, run_id: str) -> RunSteps:
        """The run as steps: a turn each, its model call and tool calls, with durations."""
        return steps_of(await self.events(run_id), now=self.clock())

    @takes_id_prefix
    async def resume_refusal(self, run_id: str) -> str | None:
        """Why resuming the run cannot succeed now, in words; None when it can."""
        return resume_refusal(await self.state(run_id), self.agents)
