"""``Worker``: claim runs from a shared store and drive many of them at once.

    stead worker --store postgresql://db/stead --agents myapp.agents:registry --concurrency 64

A worker is a ``Runtime`` (agents are found by name, so any worker can continue any run) and
a claim loop on asyncio:

    free slots? ── yes → store.claim_next(owner, limit=free slots) → one task per run
        │                  (each claim bumps the run's fencing epoch)
        └─ wait for: a claimable notice or the poll interval (slots free), a finished run
           (no slots free), or stop

Each task drives its run with ``Runtime.run(run_id, claim=...)`` — the same run loop,
handle, heartbeat and recovery rules a single process uses — and releases the lease when
the run rests (completed, failed, waiting on a person). A run this worker was fenced out of
belongs to someone else; it is left alone. A run that raised something unexpected keeps its
lease until the lease lapses, so it is retried after ``lease_ttl`` rather than in a hot loop;
the failure is in its log (``step_failed``), and the ``Limits.max_step_failures``-th in a
row, whichever worker made it, fails the run.

A worker that dies (SIGKILL, power, partition) leaves its leases to lapse; ``claim_next``
then hands its runs to the other workers, which append ``run_recovered`` and settle any call
that was in flight by its effect class (rerun, rerun with the same idempotency key, or
reconcile / ask a person). A worker that wakes up after that (SIGSTOP, a long GC pause) is
refused every write: its epoch is stale.

Runs waiting on a person have no owner; every ``approval_sweep`` seconds a worker moves the
ones whose approval deadline passed to ``timed_out``, and creates the runs of conversation
messages whose sender died before creating them (then claims them like any other).

Stopping (``stop()``; ``serve_worker`` wires SIGTERM and SIGINT to it): claim nothing more, let the
runs in hand finish for up to ``grace`` seconds, then cancel the rest and release their
leases so another worker continues them at once instead of after the lease lapses. A second
``stop()`` skips what is left of the grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from stead.core.retention import Retention
from stead.errors import Conflict, Fenced, SchemaTooNew, SteadError, StoreError, UserError
from stead.runtime._closing import Closing
from stead.runtime._lifecycle import Pruner
from stead.runtime._runtime import Runtime
from stead.runtime.agent import Agent, as_agent, check_deps, checks
from stead.runtime.processes._signals import until_signalled
from stead.store import Claim, ConversationStore, Store
from stead.store.lifecycle import announce, retire

log = logging.getLogger("stead.worker")


class Worker(Closing):
    """Claims runs from a store and drives up to ``concurrency`` of them at a time."""

    def __init__(
        self,
        store: str | Path | Store,
        agents: Iterable[Agent],
        *,
        concurrency: int = 16,
        lease_ttl: float = 30.0,
        poll_interval: float = 1.0,
        grace: float = 30.0,
        approval_sweep: float = 10.0,
        clock: Callable[[], float] = time.time,
        retention: Retention | None = None,
        **runtime_options: Any,
    ) -> None:
        # Checked before the runtime opens the store: a wrong argument leaves nothing open.
        self.concurrency = checks.count("concurrency", concurrency, 1)
        self.poll_interval = checks.seconds("poll_interval", poll_interval)
        self.approval_sweep = checks.seconds("approval_sweep", approval_sweep)
        """Seconds between sweeps that time out runs whose approval deadline passed."""
        self.grace = checks.seconds("grace", grace, zero_ok=True)
        if isinstance(agents, Iterable) and not isinstance(agents, str | bytes | Agent):
            agents = [as_agent(a) for a in agents]
            for agent in agents:  # a worker drives every one of them: their deps are needed
                if isinstance(agent, Agent):
                    check_deps(agent, runtime_options.get("deps"))
        self.runtime = Runtime(
            store, agents=agents, lease_ttl=lease_ttl, clock=clock, **runtime_options
        )
        self.store: Store = self.runtime.store
        self.owner = self.runtime.owner
        """This worker's lease owner id (host:pid:random)."""
        self.lease_ttl = lease_ttl
        self.clock = clock
        self._next_sweep = 0.0
        self._messages_since = 0.0
        self.stats: Counter[str] = Counter()
        """Claims and how each driven run ended (completed, awaiting_approval, fenced, ...)."""
        self._active: dict[str, asyncio.Task[None]] = {}
        self._releasing: set[asyncio.Task[None]] = set()
        """Releases of leases whose runs' drives ended (``_release``), awaited at shutdown."""
        self._stop = asyncio.Event()
        self._hurry = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._fingerprints: list[str] = []
        if retention is not None and not isinstance(retention, Retention):
            raise UserError(f"retention takes a stead.Retention, not {type(retention).__name__}")
        self.pruner = None if retention is None else Pruner(self.store, retention, clock)
        """Prunes finished runs in the background, a small batch at a time (``retention``)."""

    @property
    def active(self) -> int:
        """Runs being driven now."""
        return len(self._active)

    def stop(self) -> None:
        """Stop claiming and shut down gracefully; a second call cuts the grace period."""
        if self._stop.is_set():
            self._hurry.set()
        self._stop.set()

    async def close(self) -> None:
        """Close the store."""
        await self.runtime.close()

    # -- the claim loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Claim and drive runs until ``stop()``, then shut down within the grace period."""
        agents = sorted(self.runtime.agents)
        log.info(
            "worker %s ready: agents %s, concurrency %d, lease %.1fs",
            self.owner,
            ", ".join(agents),
            self.concurrency,
            self.lease_ttl,
        )
        self._fingerprints = [a.fingerprint for a in self.runtime.agents.values()]
        await self._announce()
        pruning = None if self.pruner is None else asyncio.create_task(self.pruner.run(self._stop))
        try:
            while not self._stop.is_set():
                self._slot_freed.clear()
                free = self.concurrency - len(self._active)
                claims: list[Claim] = []
                if free > 0:
                    sent = time.monotonic()  # the leases claimed count from here
                    try:
                        claims = await self.store.claim_next(
                            owner=self.owner,
                            now=self.clock(),
                            ttl=self.lease_ttl,
                            limit=free,
                            agents=agents,
                            fingerprints=self._fingerprints,
                        )
                    except StoreError as exc:
                        log.warning("claiming failed (retrying): %s", exc)
                    for c in claims:
                        self._start(c, sent)
                    if claims and len(claims) < free:
                        continue  # perhaps more arrived meanwhile; an empty claim ends this
                await self._expire_approvals()
                await self._idle(full=len(self._active) >= self.concurrency)
        finally:
            if pruning is not None:
                pruning.cancel()
                await asyncio.gather(pruning, return_exceptions=True)
            await self._shutdown()
            with contextlib.suppress(SteadError):  # else its versions lapse on their own
                await retire(self.store, self.owner)

    async def _idle(self, *, full: bool) -> None:
        """Wait for a reason to claim again."""
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._stop.wait())}
        if full:
            waits.add(asyncio.ensure_future(self._slot_freed.wait()))
        else:
            waits.add(asyncio.ensure_future(self._wait_claimable()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def _expire_approvals(self) -> None:
        """Time out runs waiting on a person past their deadline: nobody drives those."""
        # The loop's clock, as every other wait of the worker's: a virtual clock moves it.
        now = asyncio.get_running_loop().time()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.approval_sweep
        await self._check_schema()
        await self._announce()
        try:
            expired = await self.runtime.expire_approvals()
        except SteadError as exc:
            log.warning("expiring approvals failed (retrying later): %s", exc)
            return
        if expired:
            self.stats["approvals_expired"] += len(expired)
            log.info("timed out %d runs whose approval deadline passed", len(expired))
        await self._take_up_messages()

    async def _check_schema(self) -> None:
        """Stop (``SchemaTooNew`` out of ``run``) once a newer stead has migrated the store
        under this worker: rows it wrote now could break what that one expects."""
        check = getattr(self.store, "check_schema", None)
        if check is None:
            return  # a store of another kind: it has no migrations to outrun
        try:
            await check()
        except SchemaTooNew:
            log.error("a newer stead migrated the store; this worker stops claiming")
            raise
        except StoreError as exc:
            log.warning("checking the store's schema failed (retrying later): %s", exc)

    async def _announce(self) -> None:
        """Say which agent versions this worker drives, for a while: ``stead runs list``
        tells a run pinned to a version no live worker has."""
        versions = [(a.name, a.fingerprint) for a in self.runtime.agents.values()]
        try:
            await announce(
                self.store, self.owner, versions, until=self.clock() + 3 * self.approval_sweep
            )
        except SteadError as exc:
            log.warning("announcing this worker's agent versions failed: %s", exc)

    async def _take_up_messages(self) -> None:
        """Create the runs of conversation messages whose sender died before creating them
        (``Runtime.take_up_messages``), from the messages recorded since the last sweep
        (less a minute, for senders whose clocks are behind)."""
        if not isinstance(self.store, ConversationStore):
            return  # a store that keeps no conversations has no messages to take up
        until = self.clock() - self.lease_ttl
        try:
            created, left = await self.runtime._take_up(self._messages_since, until)
        except SteadError as exc:
            log.warning("taking up unanswered messages failed (retrying later): %s", exc)
            return
        self._messages_since = max(0.0, left - 60.0)
        if created:
            self.stats["messages_taken_up"] += len(created)
            log.info("created the runs of %d messages whose sender died", len(created))

    async def _wait_claimable(self) -> None:
        try:
            await self.store.wait_claimable(self.poll_interval)
        except StoreError as exc:
            log.warning("waiting for work failed (retrying): %s", exc)
            await asyncio.sleep(self.poll_interval)

    def _start(self, claim: Claim, sent: float) -> None:
        self.stats["claimed"] += 1
        if claim.previous_owner:
            self.stats["taken_over"] += 1
        # A run whose lease lapsed under its driver here (the store unreachable for a whole
        # lease) can be handed back to us: the old drive is fenced by this claim's epoch at
        # its next write, and the new one waits for it to stop, so one process never has
        # two drivers of one run (Runtime.run would refuse the second with LeaseHeld).
        previous = self._active.get(claim.run_id)
        task = asyncio.ensure_future(self._drive(claim, sent, previous))
        self._active[claim.run_id] = task

        def done(_: asyncio.Task[None]) -> None:
            if self._active.get(claim.run_id) is task:
                del self._active[claim.run_id]
            self._slot_freed.set()

        task.add_done_callback(done)

    async def _drive(
        self, claim: Claim, sent: float, previous: asyncio.Task[None] | None = None
    ) -> None:
        run_id = claim.run_id
        release = True
        outcome = "released"
        try:
            if previous is not None:
                await asyncio.wait({previous})
            view = await self.runtime.run(run_id, claim=claim, claimed_at=sent)
            outcome = view.status.value
        except Fenced as exc:
            outcome, release = "fenced", False
            log.warning("run %s fenced: %s", run_id, exc)
        except Conflict as exc:
            outcome = "conflict"  # written to from outside meanwhile: release, claim afresh
            log.info("run %s changed under us, releasing it: %s", run_id, exc)
        except asyncio.CancelledError:
            outcome = "released"
            raise
        except Exception:
            outcome, release = "error", False
            log.exception("run %s failed in this worker; its lease will lapse", run_id)
        finally:
            self.stats[outcome] += 1
            log.debug("run %s: %s (epoch %d)", run_id, outcome, claim.epoch)
            if release:
                # Beside the next claim, not before it: the run's slot is free once its drive
                # ended, and a release is a round trip to a database that may be far away.
                task = asyncio.ensure_future(self._release(run_id, claim.epoch))
                self._releasing.add(task)
                task.add_done_callback(self._releasing.discard)

    async def _release(self, run_id: str, epoch: int) -> None:
        try:
            await self.store.release(run_id, owner=self.owner, epoch=epoch)
        except Exception as exc:
            log.warning("releasing run %s failed (its lease will lapse): %s", run_id, exc)

    async def _shutdown(self) -> None:
        tasks = list(self._active.values())
        if tasks:
            log.info("stopping: %d runs in hand, up to %.1fs to finish", len(tasks), self.grace)
            # asyncio.wait never cancels what it waits for: cancelling ``everything`` below
            # leaves the runs alone until we cancel the unfinished ones on purpose.
            everything = asyncio.ensure_future(asyncio.wait(tasks))
            hurry = asyncio.ensure_future(self._hurry.wait())
            await asyncio.wait(
                {everything, hurry}, timeout=self.grace, return_when=asyncio.FIRST_COMPLETED
            )
            everything.cancel()
            hurry.cancel()
            unfinished = [t for t in tasks if not t.done()]
            for t in unfinished:
                t.cancel()
            await asyncio.gather(everything, hurry, *tasks, return_exceptions=True)
        if self._releasing:  # another worker continues those runs at once, not after a lease
            await asyncio.gather(*self._releasing, return_exceptions=True)
        log.info(
            "worker %s stopped: %s",
            self.owner,
            ", ".join(f"{k}={v}" for k, v in sorted(self.stats.items())) or "no runs",
        )


async def serve_worker(worker: Worker) -> None:
    """Run ``worker`` until SIGTERM or SIGINT (a second one cuts the grace period short)."""
    await until_signalled(worker)
