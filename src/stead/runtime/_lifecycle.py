"""A run's life after it is recorded, as ``Runtime`` methods: export and import
(``stead.store.lifecycle``), pruning (``stead.store.lifecycle``, decided by
``stead.core.retention``) and forking (``_fork``). docs/lifecycle.md is the user's page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from stead.core.builders import created_event, forked_event
from stead.core.events import RunCreated
from stead.core.fork import ForkStart, plan_fork, start_with
from stead.core.messages import (
    Attachment,
    Message,
    UserMessage,
    message_from_json,
    message_to_json,
)
from stead.core.retention import Retention
from stead.errors import ImportFileError, SteadError, UserError
from stead.runtime.agent import Agent, RunView, checks, resolve_run_id, takes_id_prefix
from stead.runtime.loop import hydrate
from stead.store import Store
from stead.store.lifecycle import (
    Imported,
    Judged,
    create_fork,
    delete,
    export_lines,
    judge,
    parse,
    payloads,
    select_runs,
    sql_store,
    sweep_blobs,
    sweep_shared_progress,
    vacuum,
    write,
)
from stead.store.lifecycle import (
    copy_store as copy_rows,
)

log = logging.getLogger("stead.retention")


@dataclass(frozen=True, slots=True, kw_only=True)
class Pruned:
    """What a prune found (``applied``: and deleted)."""

    runs: list[tuple[str, str]]
    """(run id, why) of each run that goes (went)."""
    bytes: int
    """Their event data as stored: about the space the store frees."""
    blobs: int = 0
    """Attachments deleted with them (no run left refers to them)."""
    streams: int = 0
    """Streamed text shared for watchers that no live process is behind any more (a run's
    turn each: left by a process killed mid-stream, or by runs since finished), deleted (in
    a dry run: that would be)."""
    applied: bool = False


class Lifecycle:
    """``Runtime``'s export, import, prune and fork."""

    store: Store
    clock: Callable[[], float]
    agents: dict[str, Any]

    @takes_id_prefix
    async def fork(
        self,
        run_id: str,
        *,
        at_turn: int,
        input: str | None = None,
        messages: Sequence[Message | str] | None = None,
        agent: Any = None,
        new_run_id: str | None = None,
    ) -> RunView:
        """A new queued run whose history is run ``run_id``'s up to the end of turn
        ``at_turn``, then ``input`` (the new user message), or then ``messages`` (stead
        messages or strings, the last a user message: e.g. a different reply of the model
        and the user's answer to it); driven by ``agent`` (an Agent or the name of a
        registered one; the source's by default).

        Nothing carried runs again: the source's results are the fork's history. A call of
        that turn with no result in the source (in flight, waiting on a person) is not
        carried (the fork reads an error result for it). The lineage is the fork's
        ``run_forked`` event; a run of a conversation starts a branch of it (a conversation
        of its own, whose first message is the fork). Written in one transaction."""
        checks.identifier("run_id", run_id)
        if (input is None) == (messages is None):
            raise UserError(
                "fork takes input=... (a new user message) or messages=..., one of them"
            )
        if input is not None:
            checks.text("the fork's input", input)
        if new_run_id is not None:
            checks.identifier("new_run_id", new_run_id)
        stored = await hydrate(self.store, await self.store.read_events(run_id))
        events = [e.event for e in stored]
        plan = plan_fork(events, at_turn, run_id)
        if messages is None:
            assert input is not None
            start = ForkStart(history=plan.history, input=input, attachments=())
        else:
            start = start_with(plan, messages)
            given = start.history[len(plan.history) :]
            for i, m in enumerate(
                (*given, UserMessage(content=start.input, attachments=start.attachments))
            ):
                _storable(f"fork messages[{i}]", m)
            await self._check_blobs(given, start.attachments)
        source = events[0]
        assert isinstance(source, RunCreated)
        if isinstance(agent, Agent):
            self.register(agent)  # type: ignore[attr-defined]
            name = agent.name
        elif agent is None or isinstance(agent, str):
            # By name, the agent need not be here: a worker that has it drives the fork.
            name = agent or source.agent
            if agent is not None:
                checks.identifier("agent", agent)
        else:
            raise UserError(f"fork(agent=...) takes an Agent or a name, not {type(agent).__name__}")
        rid = new_run_id or f"run_{uuid.uuid4().hex}"
        branch = f"{source.session_id}/fork-{rid[-8:]}" if source.session_id else ""
        created = created_event(
            rid,
            name,
            start.input,
            session_id=branch,
            correlation_id=source.correlation_id,
            config=source.config,
            history=start.history,
            attachments=start.attachments,
        )
        forked = forked_event(run_id, at_turn, plan)
        await create_fork(self.store, created, forked, now=self.clock())
        return await self.get(rid)  # type: ignore[attr-defined,no-any-return]

    async def _check_blobs(
        self, given: Sequence[Message], attachments: Sequence[Attachment]
    ) -> None:
        """Every attachment a fork's given messages name is stored already (a fork sends no
        new bytes: it names what its source's messages or an earlier upload stored)."""
        named = {a.digest for a in attachments}
        for m in given:
            if isinstance(m, UserMessage):
                named |= {a.digest for a in m.attachments}
        if named:
            missing = named - set(await sql_store(self.store).get_blobs(named))
            if missing:
                raise UserError(
                    f"fork messages name attachments this store does not hold: {sorted(missing)}"
                )

    async def export(
        self,
        to: str | Path | IO[str],
        *,
        run_ids: Sequence[str] = (),
        conversation: str | None = None,
        since: float | None = None,
        agent: str | None = None,
    ) -> int:
        """Write runs to ``to`` (a path or a text file) in the export format
        (docs/lifecycle.md): those named, a conversation's, or every run created since
        ``since`` and/or of ``agent`` (every run when nothing narrows it), with the runs
        their history is read from. Returns how many runs were written."""
        if isinstance(run_ids, str):
            run_ids = [run_ids]
        run_ids = [
            await resolve_run_id(self.store, checks.identifier("run_ids[]", r)) for r in run_ids
        ]
        s = sql_store(self.store)
        chosen = await select_runs(
            s, run_ids=run_ids, conversation=conversation, since=since, agent=agent
        )
        if isinstance(to, str | Path):
            # Written as it is read, a line at a time: the file may hold a whole store.
            with open(to, "w", encoding="utf-8", newline="\n") as f:  # noqa: ASYNC230
                await _write_to(f, export_lines(s, chosen))
        else:
            await _write_to(to, export_lines(s, chosen))
        return len(chosen)

    async def import_runs(
        self, source: str | Path, *, new_ids: bool = False, skip_existing: bool = False
    ) -> Imported:
        """Import an export file (checked whole before anything is written; a problem is an
        ``ImportFileError`` naming the file and line). A run id the store holds is a
        ``Conflict`` unless ``new_ids`` (each run and conversation gets a new id) or
        ``skip_existing`` (the runs the store holds are left as they are: how an import a
        crash cut short is finished)."""
        path = Path(source)
        try:
            with open(path, encoding="utf-8", newline="\n") as f:  # noqa: ASYNC230 (as above)
                parsed = parse(str(path), f)
        except FileNotFoundError:
            raise UserError(f"no file {str(path)!r} to import") from None
        except UnicodeDecodeError as exc:
            raise ImportFileError(str(path), 0, f"not UTF-8 text ({exc.reason})") from None
        return await write(
            sql_store(self.store),
            parsed,
            new_ids=new_ids,
            skip_existing=skip_existing,
            now=self.clock(),
        )

    async def prune(
        self,
        policy: Retention,
        *,
        apply: bool = False,
        vacuum_after: bool = False,
        batch: int | None = None,
    ) -> Pruned:
        """The finished runs ``policy`` lets go (``stead.Retention``), and with ``apply``
        delete them, ``batch`` (the policy's) a transaction. Never a run that is not finished,
        that a worker holds, or that a kept run was made from. ``vacuum_after`` gives SQLite's
        freed pages back to the file system. Also the streamed text shared for watchers
        (``share_progress``) that no live process is behind any more (counted in a dry run,
        deleted with ``apply``)."""
        if not isinstance(policy, Retention):
            raise UserError(f"prune takes a stead.Retention, not {type(policy).__name__}")
        s = sql_store(self.store)
        size = batch or policy.batch
        runs: list[tuple[str, str]] = []
        total = 0
        blobs = 0
        cursor: tuple[float, str] | None = None
        while True:
            judged, cursor = await judge(s, policy, now=self.clock(), limit=size, after=cursor)
            if apply:
                for i in range(0, len(judged), size):
                    part = judged[i : i + size]
                    sizes = await payloads(s, [j.verdict.run_id for j in part])
                    gone, digests = await delete(s, part)
                    blobs += await sweep_blobs(s, digests)
                    why = {j.verdict.run_id: j.verdict.reason for j in part}
                    runs += [(rid, why[rid]) for rid in gone]
                    total += sum(sizes.get(rid, 0) for rid in gone)
            else:
                seen = {r for r, _ in runs}
                fresh = [j for j in judged if j.verdict.run_id not in seen]
                sizes = await payloads(s, [j.verdict.run_id for j in fresh])
                runs += [(j.verdict.run_id, j.verdict.reason) for j in fresh]
                total += sum(sizes.get(j.verdict.run_id, 0) for j in fresh)
            if cursor is None:
                break
        streams = await sweep_shared_progress(s, now=self.clock(), apply=apply)
        if apply and vacuum_after:
            await vacuum(s)
        return Pruned(runs=runs, bytes=total, blobs=blobs, streams=streams, applied=apply)


async def _write_to(f: IO[str], lines: Any) -> None:
    async for line in lines:
        f.write(line)


async def copy_store(
    source: str | Path | Store, target: str | Path | Store, *, now: float
) -> Imported:
    """Copy every run, conversation, blob and ledger row of one store into another (SQLite
    to PostgreSQL or back), checked as an import is; the target must hold none of the
    source's run ids."""
    from stead.store import open_store

    src = source if not isinstance(source, str | Path) else open_store(source, create=False)
    dst = target if not isinstance(target, str | Path) else open_store(target)
    try:
        return await copy_rows(sql_store(src), sql_store(dst), now=now)
    finally:
        if src is not source:
            await src.close()
        if dst is not target:
            await dst.close()


class Pruner:
    """A worker's background pruning, in a task of its own: a small batch, then a pause
    (``policy.pause``) while there is more, else a look again after ``policy.interval``; the
    worker's runs never wait for it beyond one batch's transaction."""

    def __init__(self, store: Store, policy: Retention, clock: Callable[[], float]) -> None:
        self.store = sql_store(store)
        self.policy = policy
        self.clock = clock
        self.pruned = 0
        self.longest = 0.0
        """The longest batch's delete so far, seconds (what a run in flight may wait)."""
        self._cursor: tuple[float, str] | None = None

    async def step(self) -> int:
        """Judge the next candidates and delete one batch of those that go; how many went."""
        judged: list[Judged]
        judged, self._cursor = await judge(
            self.store,
            self.policy,
            now=self.clock(),
            limit=self.policy.batch,
            after=self._cursor,
        )
        part = judged[: self.policy.batch]
        await sweep_shared_progress(self.store, now=self.clock())
        if not part:
            return 0
        began = time.perf_counter()
        gone, digests = await delete(self.store, part)
        self.longest = max(self.longest, time.perf_counter() - began)
        await sweep_blobs(self.store, digests)
        self.pruned += len(gone)
        return len(gone)

    async def run(self, stop: asyncio.Event) -> None:
        """Prune until ``stop`` is set; a failure is logged and tried again next time."""
        while not stop.is_set():
            try:
                gone = await self.step()
            except SteadError as exc:
                log.warning("pruning failed (retrying later): %s", exc)
                gone = 0
            if gone:
                log.info("pruned %d runs", gone)
                with contextlib.suppress(TimeoutError):  # more may be waiting
                    await asyncio.wait_for(stop.wait(), self.policy.pause)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.policy.interval)


def _storable(what: str, m: Message) -> None:
    """A message the store can write and read back as it was: its JSON decodes to it (a
    field of the wrong type is refused, not coerced) and its text is UTF-8."""
    try:
        data = message_to_json(m)
        back = message_from_json(data)
    except (ValueError, TypeError, AttributeError) as exc:
        raise UserError(f"{what} is not a message stead can store: {exc}") from None
    if back != m:
        raise UserError(f"{what} does not read back as given: check its field types")
    checks.text(what, json.dumps(data, ensure_ascii=False))
