"""``Runtime.wait``: wait for a run another process drives to come to rest.

A run rests when it is finished (completed, failed, cancelled, timed out) or waits on a
person (``awaiting_approval``): nothing happens to it then until someone acts. The wait is
the store's own watch (``Store.wait_changed``: PostgreSQL's notices with a poll behind them,
SQLite's poll of the run's row), woken by every append, so it hears the rest as soon as the
store does, from a worker on any machine.

A run ``submit`` returned may not exist yet: its message waits for the one before it to be
answered. Its waiter watches the newest run of the conversation before it, and creates the
run itself once that one finished (as the finishing process does; the first to create it
wins, the others find it made).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from stead.core.fold import RunState
from stead.core.states import AT_REST
from stead.errors import RunNotFound, WaitTimeout
from stead.runtime.agent import Agent, RunView, chat_store, checks, resolve_run_id
from stead.runtime.loop import OwnedRun
from stead.store import ConversationEntry, RunRecord, Store


class Waiting:
    """``Runtime.wait``."""

    store: Store
    agents: dict[str, Agent]

    if TYPE_CHECKING:

        async def _queue_next(self, conversation: str) -> str | None: ...

        async def message_of(self, run_id: str) -> ConversationEntry | None: ...

    async def wait(self, run_id: str, *, timeout: float | None = None) -> RunView:  # noqa: ASYNC109
        """Wait until the run rests (finished, or waiting on a person) and return its view;
        at once when it rests already. Whoever drives it (a worker, another process) is
        heard through the store, not polled here. ``run_id`` may be the start of an id (as
        ``stead runs list`` prints it), or the id ``submit`` returned for a run that is not
        created yet. ``timeout`` (seconds; None waits as long as it takes): past it, a
        ``WaitTimeout`` (also a ``TimeoutError``) saying where the run is; call again to go on
        waiting, nothing is lost."""
        checks.identifier("run_id", run_id)
        if timeout is not None:
            checks.seconds("timeout", timeout, zero_ok=True)
        loop = asyncio.get_running_loop()
        deadline = math.inf if timeout is None else loop.time() + timeout
        run_id = await self._named(run_id)
        while True:
            record = await self._run_record(run_id)
            if record is None:
                seen = await self._behind(run_id)
                if seen is None:
                    continue  # its run was created meanwhile
                watched, seq, status = seen
            else:
                if record.status in AT_REST:
                    state, _ = await OwnedRun.load_state(self.store, run_id)
                    return self._view(state)
                watched, seq, status = run_id, record.last_seq, record.status
            remaining = deadline - loop.time()
            if remaining <= 0:
                assert timeout is not None
                raise WaitTimeout(_still(run_id, watched, status, timeout))
            # Bounded, so an unbounded wait still looks again now and then.
            await self.store.wait_changed(watched, seq, min(remaining, 3600.0))

    def _view(self, state: RunState) -> RunView:
        agents: Mapping[str, Agent] = self.agents
        return RunView.of(state, agents)

    async def _named(self, text: str) -> str:
        """The run ``text`` names; a message's run not created yet is named by its whole id."""
        try:
            return await resolve_run_id(self.store, text)
        except RunNotFound:
            if await self.message_of(text) is None:
                raise
            return text

    async def _run_record(self, run_id: str) -> RunRecord | None:
        try:
            return await self.store.get_run(run_id)
        except RunNotFound:
            return None

    async def _behind(self, run_id: str) -> tuple[str, int, str] | None:
        """For a message's run not created yet: create it if the message before it is
        answered (None), else what to watch: the newest run of the conversation before it,
        its sequence and status."""
        entry = await self.message_of(run_id)
        if entry is None:
            raise RunNotFound(run_id)  # it was pruned meanwhile
        if await self._queue_next(entry.conversation_id) is not None:
            return None
        earlier = (await chat_store(self.store).conversation(entry.conversation_id))[
            : entry.position
        ]
        for before in reversed(earlier):
            record = await self._run_record(before.run_id)
            if record is not None:
                return before.run_id, record.last_seq, record.status
        return None  # nothing before it exists: _queue_next creates it next time round


def _still(run_id: str, watched: str, status: str, timeout: float) -> str:
    if watched == run_id:
        where = f"it is {status}"
    else:
        where = f"its message waits for run {watched} ({status}) to answer the one before it"
    return (
        f"run {run_id} did not come to rest within {timeout:g}s ({where}); wait again to go "
        "on waiting"
    )
