"""``Pool``: an executor process (``stead executor``) performing effects from the ledger.

    stead executor --store postgresql://db/stead --agents myapp.agents:registry \\
        --queues gpu,default --concurrency 8

A pool claims accepted assignments of its queues (and orphaned ones: held by an executor
whose lease lapsed) from the execution ledger, performs each with the same tool registry and
model providers a worker would (an ``InProcessExecutor`` of the agent that has the tool or
the model), and settles it under the epoch its claim made:

    free slots? ── claim (each claim makes a new epoch) → start → perform → settle{outcome}
        └─ wait for work: a notice on the queue's channel (PostgreSQL), or reads that back
           off to the poll interval (SQLite)

On PostgreSQL the claim writes ``started`` itself for every key but a non_idempotent tool's
(``claim(start=True)``), and ``start`` and ``settle`` name this executor besides the epoch
(``store.postgres._ledger.PostgresLedger``: why a claim lost with the database server is safe).

A heartbeat renews the pool's lease every third of ``lease_ttl`` and reads back the keys it
still holds: one it no longer holds was taken over (this process was frozen past its lease),
so its copy of the run's signal fires and its settle, if it comes, is refused by the store;
each key held also has a local deadline (``stead._lease``: the last heartbeat's send plus the
TTL less a margin), past which its signal fires and its tool's ``ctx.aborted`` is True even
before a heartbeat could tell, and a tool that is not read_only starts only with
``lease_min_left`` seconds of it left (a heartbeat first when fewer); ``ctx.fencing_token``
is the key's epoch, which grows with each executor that claims it;
one whose run asked to cancel fires the signal too (a subprocess group gets SIGTERM then
SIGKILL, as in process). One it holds with no task running it (a claim or a ``started``
whose reply was lost, a settle that failed for good) is given up as a takeover would after a
lapsed lease: back to the queue, or settled ``tool_unknown`` for a non_idempotent tool that
started (``store.ledger._strays``); its lease alone would never let it go.

Stopping (SIGTERM): claim nothing more, let the effects in hand finish for ``grace``
seconds, then fire their signals and settle what they return (a cancelled tool settles
``cancelled``); a key whose effect never started goes back to the queue (``restarted``) at
once; the lease ends (``retire``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from stead._lease import HeldLease
from stead._signal import AbortSignal
from stead.core.effects import (
    Assignment,
    ModelBody,
    ModelFailed,
    ToolFailed,
    assignment_from_json,
)
from stead.errors import SteadError, StoreError, UserError
from stead.runtime.agent import Agent, check_deps
from stead.runtime.executors import Forwarder, InProcessExecutor, outcome_to_json
from stead.runtime.loop import default_margin, min_left_for, wait_bound
from stead.runtime.processes._signals import until_signalled
from stead.store import (
    Claimed,
    forget_progress,
    give_up_strays,
    ledger_for,
    open_store,
    pause_queue,
    set_queue_limit,
)

log = logging.getLogger("stead.executor")

PoolHook = Callable[[str, str | None], None]
"""``hook(point, tool or None)`` at ``after_claim``, ``after_start`` and ``before_settle``:
nothing in production; a test SIGKILLs the process there."""


_TAKEN_OVER = "this executor's lease lapsed and another took the effect over"


def _drop(running: dict[str, Any], key: str, task: object) -> None:
    """Forget ``task``'s entry once it is done, and only its own: the key may be held by a
    newer task by then (the old one gave the key back, a store failure before its start,
    and the next claim took it again before this callback ran)."""
    entry = running.get(key)
    if entry is not None and entry[0] is task:
        del running[key]


def _nothing(point: str, tool: str | None) -> None:
    return None


class Pool:
    """Claims effects of ``queues`` from the store's ledger and performs up to
    ``concurrency`` at a time."""

    def __init__(
        self,
        store: Any,
        agents: Iterable[Agent],
        *,
        queues: Iterable[str],
        concurrency: int = 8,
        lease_ttl: float = 15.0,
        poll_interval: float = 0.5,
        grace: float = 30.0,
        max_concurrent: int | None = None,
        clock: Callable[[], float] = time.time,
        hook: PoolHook = _nothing,
        deps: Any = None,
    ) -> None:
        """``max_concurrent``: hold each of ``queues`` to that many effects at once across
        every executor of the fleet (the store keeps the count; ``store.ledger._limits``).
        ``deps``: this process's live objects its tools read as ``ctx.deps``, as a
        ``Runtime``'s (checked against each agent's ``deps_type``; never recorded)."""
        self.queues = [q for q in queues if q]
        if not self.queues:
            raise UserError("an executor needs --queues naming at least one queue")
        if concurrency < 1:
            raise UserError("--concurrency must be at least 1")
        self.store = open_store(store) if isinstance(store, str) else store
        self.ledger = ledger_for(self.store, poll_interval=min(poll_interval, 1.0))
        self.id = f"executor-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.concurrency = concurrency
        self.max_concurrent = max_concurrent
        self.lease_ttl = lease_ttl
        self.poll_interval = poll_interval
        self.grace = grace
        self.clock = clock
        self._hook = hook
        self._progress = Forwarder(self.ledger, clock=clock)
        """Model calls' text deltas, on their way to the runs' owners (progress from afar)."""
        self._tools: dict[str, InProcessExecutor] = {}
        self._models: dict[str, InProcessExecutor] = {}
        for agent in agents:
            check_deps(agent, deps)
            here = InProcessExecutor(
                agent.model, agent.registry, self._progress,
                cancel_grace=agent.limits.cancel_grace,
                deps=deps, max_result=agent.limits.max_tool_result,
            )  # fmt: skip
            for t in agent.registry:
                self._tools.setdefault(t.name, here)
            self._models.setdefault(agent.model.model_name, here)
        self._running: dict[str, tuple[asyncio.Task[None], AbortSignal, Claimed]] = {}
        self._stopping = asyncio.Event()
        self._stops = 0
        self.performed = 0
        """Effects this pool settled (for tests and metrics)."""
        self.refused = 0
        """Settles the store refused: a stale epoch (taken over) or already settled."""
        self._claims_begun = 0
        self._claims_ended = 0
        """Claims sent and answered: a heartbeat gives up no key while one is on the way
        (the key may be in its reply)."""
        self._strays: set[str] = set()
        """Keys the last heartbeat found held here with no task."""
        self.lease_margin = default_margin(lease_ttl)
        self.lease_min_left = min_left_for(lease_ttl, self.lease_margin, 3.0)
        self.store.bound_waits(wait_bound(self.lease_margin))
        self._leases: dict[str, HeldLease] = {}
        """The local deadline of each key held (its token the key's epoch)."""
        self._confirmed_at = time.monotonic()
        """When the last heartbeat the store answered was sent (monotonic). ``run`` beats
        before its first claim; until then, the pool's making."""

    def stop(self) -> None:
        """Claim nothing more; a second call cuts the grace short."""
        self._stops += 1
        self._stopping.set()

    async def run(self) -> None:
        """Serve until ``stop``; then finish or release what is in hand and retire."""
        await self._warm()
        if self.max_concurrent is not None:
            for q in self.queues:
                await set_queue_limit(self.ledger, q, self.max_concurrent)
        await self._beat()
        log.info(
            "executor %s ready: queues %s, concurrency %d, lease %.1fs",
            self.id, ",".join(self.queues), self.concurrency, self.lease_ttl,
        )  # fmt: skip
        beat = asyncio.ensure_future(self._heartbeats())
        try:
            while not self._stopping.is_set():
                free = self.concurrency - len(self._running)
                claims = []
                if free > 0:
                    self._claims_begun += 1
                    try:
                        claims = await self.ledger.claim(
                            self.id, self.queues, limit=free, now=self.clock(), start=True
                        )
                    except StoreError as exc:
                        log.warning("claiming effects failed (will retry): %s", exc)
                    finally:
                        self._claims_ended += 1
                for c in claims:
                    self._start(c)
                # Fewer than asked for: nothing more is claimable now, so wait for a notice
                # or the poll (claiming again at once would cost an empty claim per effect).
                await self._idle()
            await self._shutdown()
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            with contextlib.suppress(StoreError):
                await self.ledger.retire(self.id)

    async def _warm(self) -> None:
        """Make the model providers now, in a thread: the first one imports its SDK, which
        takes seconds and would otherwise block the loop inside the first call, long
        enough for this executor's lease to lapse under it. A provider that cannot be made
        here (a missing key) fails at its first call, as in a worker."""
        for here in {id(e): e for e in self._models.values()}.values():
            resolve = getattr(here._model, "resolve", None)
            if callable(resolve):
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(resolve)

    async def _idle(self) -> None:
        """Wait for work (slots free), a finished effect (none free), or stop."""
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._stopping.wait())}
        if len(self._running) < self.concurrency:
            waits.add(asyncio.ensure_future(self.ledger.wait_work(self.queues, self.poll_interval)))
        else:
            waits.update(t for t, _, _ in self._running.values())
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                if not any(w is t for t, _, _ in self._running.values()):
                    w.cancel()

    def _start(self, c: Claimed) -> None:
        old = self._running.get(c.effect_id)
        if old is not None:  # given back and claimed again while its old task was ending
            old[1].abort("the effect was claimed again")
        sig = AbortSignal()
        # The executor's lease, not the claim, is what keeps the key: it counts from the last
        # heartbeat the store answered.
        held = HeldLease(
            token=c.epoch, ttl=self.lease_ttl, margin=self.lease_margin,
            sent_at=self._confirmed_at,
        )  # fmt: skip
        held.lost.add_callback(sig.abort)
        held.arm()
        self._leases[c.effect_id] = held
        task = asyncio.ensure_future(self._guarded(c, sig, held))
        self._running[c.effect_id] = (task, sig, c)
        task.add_done_callback(functools.partial(_drop, self._running, c.effect_id))

    async def _guarded(self, c: Claimed, sig: AbortSignal, held: HeldLease) -> None:
        """``_perform``, with a store failure logged: the key stays held until this
        executor's lease lapses, then the next holder recovers it by its class."""
        try:
            await self._perform(c, sig, held)
        except StoreError as exc:
            log.warning("effect %s: the store failed: %s", c.effect_id, exc)
            with contextlib.suppress(StoreError):  # never started: give it back
                await self.ledger.release(
                    c.effect_id, executor=self.id, epoch=c.epoch,
                    reason=f"executor {self.id}: the store failed", now=self.clock(),
                )  # fmt: skip
        finally:
            held.close()
            if self._leases.get(c.effect_id) is held:
                del self._leases[c.effect_id]

    async def _ready(self, held: HeldLease) -> bool:
        """May an effect that is not read_only start now? Yes while the key's lease has
        ``lease_min_left`` seconds left (after a heartbeat, bounded by what is left, when it
        had fewer); never once it is lost."""
        if held.lapsed():
            return False
        if held.left() < self.lease_min_left:
            try:
                async with asyncio.timeout(max(0.0, held.left())):
                    await self._beat()
            except (StoreError, TimeoutError) as exc:
                log.warning("executor heartbeat before an effect failed: %r", exc)
            if not held.lapsed() and held.left() < self.lease_min_left:
                held.lose("lease lost: it could not be renewed before an effect")
        return not held.lapsed()

    async def _perform(self, c: Claimed, sig: AbortSignal, held: HeldLease) -> None:
        try:
            a = assignment_from_json(c.assignment)
        except ValueError as exc:
            # Settled as failed, not held: a held key with no task would be given back to
            # the queue by the heartbeat, claimed and given back again, for ever.
            log.error("effect %s: undecodable assignment: %s", c.effect_id, exc)
            why = f"executor {self.id} cannot read this assignment: {exc}"
            failed: Any = (
                ToolFailed(failure=why)
                if "tool" in c.assignment
                else ModelFailed(code="executor_error", message=why)
            )
            await self._settle(c, outcome_to_json(failed))
            return
        tool = None if isinstance(a.body, ModelBody) else a.body.tool_name
        here = self._executor_for(a)
        self._hook("after_claim", tool)
        # Only a non_idempotent tool's recovery depends on its start and its settle: it alone
        # waits for the disk (any other effect lost with its writes runs again).
        sync = not isinstance(a.body, ModelBody) and a.body.effect_class == "non_idempotent"
        guarded = not isinstance(a.body, ModelBody) and a.body.effect_class != "read_only"
        if guarded and not await self._ready(held):
            return  # lost: the next holder of the key recovers it by its class
        if not c.started and not await self.ledger.start(
            c.effect_id, epoch=c.epoch, now=self.clock(), sync=sync, executor=self.id
        ):
            return  # taken over or cancelled meanwhile
        self._hook("after_start", tool)
        if here is None:
            what = "model" if tool is None else "tool"
            outcome: Any = (
                ToolFailed(failure=f"tool {tool!r} is not registered in executor {self.id}")
                if tool is not None
                else ModelFailed(code="executor_error", message=f"no {what} here")
            )
        else:
            if tool is None:
                self._progress.performing(a.key.run_id, c.effect_id)
            elif guarded and not await self._ready(held):
                return  # lost while the start was written: the next holder recovers it
            here.leases[c.effect_id] = held
            try:
                outcome = await here.run(a, signal=sig)
            finally:
                here.leases.pop(c.effect_id, None)
        streamed = await self._progress.finish(a.key.run_id, c.effect_id)
        self._hook("before_settle", tool)
        if isinstance(outcome, ModelFailed) and outcome.code == "rate_limited":
            # The provider is slowing the fleet down, not this call: pause the queue for
            # every executor, for as long as it asked (a second if it did not say).
            wait = outcome.retry_after if outcome.retry_after is not None else 1.0
            with contextlib.suppress(StoreError):
                await pause_queue(self.ledger, c.queue, self.clock() + wait)
        if await self._settle(c, outcome_to_json(outcome), sync=sync):
            self.performed += 1
            if streamed:  # the settled message is in; its preview is done with
                with contextlib.suppress(StoreError):
                    await forget_progress(self.ledger, c.effect_id)
        else:
            self.refused += 1
            log.warning("effect %s: settle at epoch %d refused (taken over)", c.effect_id, c.epoch)

    async def _settle(self, c: Claimed, outcome: dict[str, Any], *, sync: bool = True) -> bool:
        """Settle, retrying a failed write with backoff for about half a minute: the effect
        happened, so its outcome is worth waiting for the store. A retry of a settle that
        did commit is refused (already settled), which loses nothing. ``sync``: wait for the
        disk (a non_idempotent tool's: lost, it could only become ``tool_unknown``); any
        other settle lost with the database server leaves its key held here with no task,
        which the heartbeat gives back to run again (``Ledger.settle``)."""
        for attempt in range(6):
            try:
                return await self.ledger.settle(
                    c.effect_id, epoch=c.epoch, outcome=outcome, now=self.clock(),
                    executor=self.id, sync=sync,
                )  # fmt: skip
            except StoreError as exc:
                if attempt == 5:
                    raise
                log.warning("effect %s: settle failed (retrying): %s", c.effect_id, exc)
                await asyncio.sleep(0.5 * 2**attempt)
        return False

    def _executor_for(self, a: Assignment) -> InProcessExecutor | None:
        body = a.body
        if isinstance(body, ModelBody):
            return self._models.get(body.model) or next(iter(self._models.values()), None)
        return self._tools.get(body.tool_name)

    async def _beat(self) -> None:
        begun = self._claims_begun
        quiet = begun == self._claims_ended
        sent = time.monotonic()  # the lease counts from the send, never from the answer
        held, cancelled = await self.ledger.heartbeat(
            self.id, self.queues, ttl=self.lease_ttl, now=self.clock()
        )
        self._confirmed_at = sent
        for key, (_task, sig, c) in list(self._running.items()):
            lease = self._leases.get(key)
            if key in cancelled:
                sig.abort("the run asked to cancel this effect")
            elif key not in held and c.epoch and not sig.aborted:
                sig.abort(_TAKEN_OVER)
                if lease is not None:
                    lease.lose(_TAKEN_OVER)
            if key in held and lease is not None:
                lease.confirmed(sent)
        strays = held - self._running.keys()
        # Safe to give up: no claim was on the way while the ledger was read (no reply still
        # to come holds these keys), or the last beat found them too (a claim does not take
        # a third of a lease to answer; a pool that claims without pause still recovers).
        # Either way each write checks the holder and its epoch.
        ripe = strays if quiet and self._claims_begun == begun else strays & self._strays
        self._strays = strays - ripe
        if ripe:
            gone = await give_up_strays(self.ledger, self.id, ripe, now=self.clock())
            for key, what in gone.items():
                log.warning("effect %s: held here with no task running it: %s", key, what)

    async def _heartbeats(self) -> None:
        period = self.lease_ttl / 3
        while True:
            await asyncio.sleep(period)
            try:
                # Bounded: a heartbeat stuck on a dead connection must not hold up the next
                # one (each key's own deadline fires regardless).
                async with asyncio.timeout(period):
                    await self._beat()
            except (StoreError, TimeoutError) as exc:
                log.warning("executor heartbeat failed (will retry): %r", exc)

    async def _shutdown(self) -> None:
        tasks = [t for t, _, _ in self._running.values()]
        if tasks:
            deadline = asyncio.get_running_loop().time() + self.grace
            while self._stops < 2 and any(not t.done() for t in tasks):
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                await asyncio.wait(tasks, timeout=min(left, 0.1))
        for _task, sig, _c in list(self._running.values()):
            sig.abort("the executor is stopping")
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        for task, _sig, c in list(self._running.values()):
            # Still running after its signal: give back what never started; a started
            # effect's lease lapses and the next holder recovers it by its class.
            task.cancel()
            with contextlib.suppress(SteadError):
                await self.ledger.release(
                    c.effect_id, executor=self.id, epoch=c.epoch,
                    reason=f"executor {self.id} stopped", now=self.clock(),
                )  # fmt: skip

    async def close(self) -> None:
        """Close the ledger and the store."""
        await self.ledger.close()
        await self.store.close()


async def serve_pool(pool: Pool) -> None:
    """Run ``pool`` until SIGTERM or SIGINT (a second one cuts the grace short)."""
    await until_signalled(pool)
