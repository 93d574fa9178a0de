"""``Runtime``: the facade a program uses to start, drive, inspect and steer runs.

One ``Runtime`` holds a store and the agents this process can drive. ``run`` claims the run's
lease (bumping its fencing epoch), drives it until it finishes or waits on a person, and
releases the lease. A process that finds a run whose owner died on this machine takes it over
at once; otherwise it waits for the lease to lapse. The methods live by concern: driving in
``_drive.py``, steering (decisions, cancels, requeues, timeouts) in ``_steer.py``, following
and paging in ``_follow.py``, conversations in ``_conversation.py``, waiting for a run another
process drives in ``_waiting.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from stead import _crash
from stead._crash import CrashHook
from stead.core.builders import created_event, requeue_event
from stead.core.fold import RunState
from stead.core.progress import (
    ProgressListener,
    ProgressSink,
    ProgressWindow,
)
from stead.core.reconcile import RecoveryPolicy
from stead.core.settings import ModelSettings
from stead.core.states import RESUMABLE, RunStatus
from stead.errors import (
    StoreError,
    UnknownAgent,
    UserError,
)
from stead.runtime._children import RunTree, Trees
from stead.runtime._closing import Closing
from stead.runtime._conversation import Conversations
from stead.runtime._find import Finding
from stead.runtime._follow import Following
from stead.runtime._lifecycle import Lifecycle
from stead.runtime._steer import Steering
from stead.runtime._waiting import Waiting
from stead.runtime.agent import (
    Agent,
    Answering,
    AttachmentInput,
    ChildTool,
    PendingApproval,
    RunView,
    as_agent,
    check_deps,
    checked_history,
    checks,
    store_attachments,
    takes_id_prefix,
    with_loaded_from,
    with_settings,
)
from stead.runtime.executors import Executor, InProcessExecutor, ProgressShare, routed
from stead.runtime.loop import (
    Backoff,
    Driving,
    FreshRuns,
    Keeper,
    Observer,
    OwnedRun,
    checked,
    default_margin,
    hydrate,
    min_left_for,
    owner_id,
    stored_result,
    wait_bound,
)
from stead.store import Ledger, Store, StoredEvent, open_store

__all__ = ["PendingApproval", "RunTree", "RunView", "Runtime"]


class Runtime(
    Driving,
    Steering,
    Following,
    Finding,
    Conversations,
    Waiting,
    Answering,
    Lifecycle,
    Closing,
    Trees,
):
    """Start, drive and steer durable runs. Every method that takes a run id takes the start
    of one too, as ``stead runs list`` prints it (at least 4 characters, ``run_`` aside, that
    start no other run's id); a start of several, or a shorter one, is an ``AmbiguousId``
    naming the candidates, before anything is read or written."""

    def __init__(
        self,
        store: str | Path | Store = "sqlite:///stead.db",
        *,
        agents: Iterable[Agent] = (),
        lease_ttl: float = 30.0,
        clock: Callable[[], float] = time.time,
        snapshot_every: int = 256,
        executor_factory: Callable[[Agent, ProgressSink | None], Executor] | None = None,
        on_progress: ProgressListener | None = None,
        backoff: Backoff | None = None,
        progress: ProgressWindow | None = None,
        crash: CrashHook = _crash.point,
        deps: Any = None,
        recovery: RecoveryPolicy | None = None,
        observers: Iterable[Observer] = (),
        lease_margin: float | None = None,
        lease_min_left: float = 3.0,
        share_progress: bool = False,
    ) -> None:
        """``on_progress`` gets every streamed ``ProgressFrame`` (provisional text) as it
        arrives; ``progress`` (or ``self.progress``) is the bounded window readers poll.
        ``crash`` is called at every named crash point a drive or a steering call reaches
        (``stead._crash.CrashHook``; by default the SIGKILL a test arms, else nothing).
        ``deps`` are this process's live objects for tools (``ctx.deps``): never recorded,
        checked against each agent's ``deps_type``. Without deps, an agent with a
        ``deps_type`` is still taken: its runs can be read, answered and decided here, and
        driving one is refused (``UserError``) before anything is written.
        ``recovery`` says how a takeover treats the effects a dead owner left in flight
        (``stead.RecoveryPolicy``: dispose by default).
        ``observers`` watch every drive (``stead.otel.Tracing``); none costs nothing.
        ``lease_margin``: seconds before the store's expiry of its lease that a drive stops
        trusting it, unless a renewal was confirmed meanwhile (a quarter of ``lease_ttl`` by
        default): past that local deadline (a pause, a partition) the drive aborts as a
        cancel does and gives the run up; no wait on the store (a busy SQLite file, a
        PostgreSQL statement, lock or connect) lasts longer than half of it
        (``Store.bound_waits``). ``lease_min_left``: seconds of lease an effect
        that is not read_only needs left to start (renewed first when fewer; never more
        than half a fresh lease counts). ``share_progress``: the text this process streams
        for its runs is written to the store too (batched, unsynced), so ``stead runs watch``
        and the dashboard of another process show it as it comes (a SQL store only)."""
        if not isinstance(store, str | Path) and not all(
            hasattr(store, m) for m in ("create_run", "append", "read_events", "claim")
        ):
            raise UserError(
                f"Runtime needs a store URL (sqlite:///path.db, postgresql://host/db), a Path or "
                f"a Store, not {type(store).__name__}"
            )
        if isinstance(agents, Agent):
            raise UserError("agents takes a list of Agents, not one Agent; pass agents=[agent]")
        if isinstance(agents, str | bytes) or not isinstance(agents, Iterable):
            raise UserError(f"agents takes a list of Agents, not {type(agents).__name__}")
        agents = [as_agent(a) for a in agents]
        for a in agents:
            if not isinstance(a, Agent):
                raise UserError(f"agents takes Agents, and {type(a).__name__} is not one")
        self.deps = deps
        checks.seconds("lease_ttl", lease_ttl)
        margin = default_margin(lease_ttl)
        if lease_margin is not None:
            margin = checks.seconds("lease_margin", lease_margin, zero_ok=True)
            if margin >= lease_ttl:
                raise UserError(
                    f"lease_margin ({margin:g}s) must be shorter than lease_ttl ({lease_ttl:g}s)"
                )
        checks.seconds("lease_min_left", lease_min_left, zero_ok=True)
        checks.count("snapshot_every", snapshot_every, 1)
        self.store: Store = store if not isinstance(store, str | Path) else open_store(store)
        self.agents: dict[str, Agent] = {}
        for a in agents:
            self.register(a)
        self.owner = owner_id()
        self.lease_ttl = lease_ttl
        self.lease_margin = float(margin)
        self.lease_min_left = min_left_for(lease_ttl, self.lease_margin, lease_min_left)
        self.store.bound_waits(wait_bound(self.lease_margin))
        self.clock = clock
        self.snapshot_every = snapshot_every
        self.progress = progress or ProgressWindow()
        if on_progress is not None:
            self.progress.subscribe(on_progress)
        self.backoff = backoff or Backoff()
        self.watch_interval = 0.2
        self._keeper = Keeper(self)
        self._crash = crash
        if recovery is not None and not isinstance(recovery, RecoveryPolicy):
            raise UserError(f"recovery takes a stead.RecoveryPolicy, not {type(recovery).__name__}")
        self.recovery = recovery or RecoveryPolicy()
        self.observers: list[Observer] = checked(observers)
        self._fresh = FreshRuns()
        self._driving: set[str] = set()
        """Runs a ``run`` of this Runtime is driving now. The store lets an owner claim its
        own lease again (a retry after a failed release), so it cannot tell two drivers in
        one process apart: this set does."""
        self._ledgers: dict[int, Ledger] = {}
        """The store's execution ledger, once an agent routes a tool to a queue."""
        self._share: ProgressShare | None = None
        if share_progress:
            try:
                shared = self._ledger()
            except StoreError as exc:
                raise UserError(
                    f"share_progress needs a SQLite or PostgreSQL store: {exc}"
                ) from exc
            self._share = ProgressShare(shared, clock=clock)
            self.progress.subscribe(self._share)
        self._executor_factory = executor_factory or (
            lambda agent, sink: routed(
                InProcessExecutor(
                    agent.model,
                    agent.registry,
                    sink,
                    cancel_grace=agent.limits.cancel_grace,
                    deps=self.deps,
                    max_result=agent.limits.max_tool_result,
                ),
                agent.registry,
                self.store,
                self._ledgers,
                agent.model_queue,
                self._crash,
            )
        )

    def register(self, agent: Agent) -> None:
        """Make ``agent`` available to drive runs that name it."""
        agent = as_agent(agent)
        if not isinstance(agent, Agent):
            raise UserError(f"register() takes an Agent, not {type(agent).__name__}")
        if agent.name in self.agents and self.agents[agent.name] is not agent:
            raise UserError(f"two different agents are named {agent.name!r}")
        if self.deps is not None:  # without any, only driving its runs needs them
            check_deps(agent, self.deps)
        self.agents[agent.name] = agent
        for t in agent.registry:  # a worker of the parent drives its children too
            if isinstance(t, ChildTool) and self.agents.get(t.agent.name) is not t.agent:
                self.register(t.agent)

    async def close(self) -> None:
        """Close the store."""
        await self._keeper.close()
        if self._share is not None:
            await self._share.close()
        for ledger in self._ledgers.values():
            await ledger.close()
        await self.store.close()

    # -- lifecycle --------------------------------------------------------------------------

    async def start(
        self,
        agent: Agent | str,
        input: str,
        *,
        run_id: str | None = None,
        session_id: str = "",
        correlation_id: str = "",
        config: dict[str, Any] | None = None,
        settings: ModelSettings | None = None,
        history: Iterable[Any] | None = None,
        attachments: Iterable[AttachmentInput] = (),
    ) -> str:
        """Create a queued run and return its id (nothing runs until ``run``).

        Every argument is checked first: a wrong one is a ``UserError`` and nothing is written
        (``input`` is the user's text, a ``str``; ids are non-empty plain text). ``settings``
        override the agent's model settings for this run (recorded in its config).
        ``history``: the messages before ``input`` (``RunView.messages`` of another run, or
        message dicts); ``attachments``: ``stead.Image`` / ``stead.Document`` sent with ``input``.
        """
        agent = as_agent(agent)
        if not isinstance(agent, Agent | str):
            raise UserError(
                f"start() takes an Agent or the name of a registered one, not "
                f"{type(agent).__name__}"
            )
        checks.text("the run's input", input)
        if run_id is not None:
            checks.identifier("run_id", run_id)
        checks.label("session_id", session_id)
        checks.label("correlation_id", correlation_id)
        checks.json_object("config", config)
        config = with_settings(config, settings)
        name = agent.name if isinstance(agent, Agent) else agent
        if isinstance(agent, Agent):
            self.register(agent)
        elif name not in self.agents:
            raise UnknownAgent(f"no agent named {name!r} is registered with this Runtime")
        config = with_loaded_from(config, self.agents[name])
        earlier = await checked_history(self.store, history)
        refs = await store_attachments(self.store, attachments, self.clock())
        rid = run_id or f"run_{uuid.uuid4().hex}"
        created = created_event(
            rid,
            name,
            input,
            session_id=session_id,
            correlation_id=correlation_id,
            config=config,
            history=earlier,
            attachments=refs,
        )
        await self.store.create_run(created, now=self.clock())
        self._fresh.started(created)  # its first drive here need not read it back
        return rid

    @takes_id_prefix
    async def resume(self, run_id: str, reason: str = "resumed") -> RunView:
        """Continue a run: requeue it if it failed, was cancelled or timed out, then drive it.

        A run whose worker crashed (still running or awaiting_tool) is simply driven again.
        """
        state, _ = await OwnedRun.load_state(self.store, run_id)
        if state.status is RunStatus.COMPLETED:
            raise UserError(f"run {run_id} is completed; there is nothing to resume")
        if state.status in RESUMABLE:
            await self._append_external(run_id, lambda s: [requeue_event(reason)])
        return await self.run(run_id)

    # -- reading ----------------------------------------------------------------------------

    @takes_id_prefix
    async def get(self, run_id: str) -> RunView:
        """The run's current view."""
        checks.identifier("run_id", run_id)
        state, _ = await OwnedRun.load_state(self.store, run_id)
        return await self._in_tree(RunView.of(state, self.agents), state)

    async def stored_result(self, handle: str) -> str:
        """The whole text of a tool result stored by reference (``Limits.result_by_reference``),
        by the handle its recorded result names (``sha256:...``): what a tool that takes a
        handle reads."""
        checks.identifier("handle", handle)
        return await stored_result(self.store, handle)

    @takes_id_prefix
    async def state(self, run_id: str) -> RunState:
        """The run's folded state (for tools and tests that need everything)."""
        checks.identifier("run_id", run_id)
        state, _ = await OwnedRun.load_state(self.store, run_id)
        return state

    @takes_id_prefix
    async def events(self, run_id: str, after: int = 0) -> list[StoredEvent]:
        """The run's log, after sequence ``after`` (a conversation's ``run_created`` with its
        whole history, read from the runs before it: the store keeps each message once)."""
        checks.identifier("run_id", run_id)
        checks.count("after (a sequence number)", after, 0)
        return await hydrate(self.store, await self.store.read_events(run_id, after))

    def _agent_for(self, state: RunState) -> Agent:
        return self._agent_named(state.agent, state.run_id)

    def _agent_named(self, name: str, run_id: str) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise UnknownAgent(
                f"run {run_id} belongs to agent {name!r}, which this Runtime was "
                f"not given (it has: {known}); pass agents=[...] to Runtime"
            )
        return agent
