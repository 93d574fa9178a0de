"""``stead runs export|import|prune|fork`` and ``stead store copy``: a run's life after it is
recorded (docs/lifecycle.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.text import Text

from stead.cli._args import positive
from stead.cli._command import Command, command, runtime_command
from stead.cli._list import _SPAN, _UNIT, since
from stead.core.fork import TurnNotReached, decode_messages
from stead.core.retention import Retention
from stead.errors import UserError
from stead.runtime import Runtime, resolve_run_id
from stead.store import open_store
from stead.store.lifecycle import Imported


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_ids", nargs="*", metavar="RUN", help="runs to export (a prefix will do)")
    p.add_argument("--conversation", default=None, help="every run of this conversation")
    p.add_argument("--since", default=None, help="runs created since: 3d, 2h, or an ISO date")
    p.add_argument("--agent", default=None, help="only runs of this agent")
    p.add_argument("-o", "--output", default="-", help="the file to write (default stdout)")


@runtime_command("export", "write runs to a JSON Lines file", _export_arguments, run_id=False)
async def _export(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    """Write runs, with everything that belongs to them (their events, the runs their history
    is read from, their conversation messages, attachments and ledger rows), in stead's
    versioned export format, for ``stead runs import`` into any store. With no RUN and no
    option: every run of the store."""
    run_ids = [await resolve_run_id(rt.store, r) for r in args.run_ids]
    cutoff = since(args.since, time.time()) if args.since is not None else None
    options = {"conversation": args.conversation, "since": cutoff, "agent": args.agent}
    if args.output == "-":
        n = await rt.export(sys.stdout, run_ids=run_ids, **options)
    else:
        n = await rt.export(args.output, run_ids=run_ids, **options)
        out.print(Text(f"exported {n} runs to {args.output}"))
    return 0


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a file written by stead runs export")
    p.add_argument(
        "--new-ids",
        action="store_true",
        help="give every run (and conversation) a new id instead of refusing ids that exist",
    )
    p.add_argument(
        "--skip-existing",
        action="store_true",
        help="leave the runs the store holds as they are (finish an import a crash cut short)",
    )


@command("import", "read runs from an export file", _import_arguments)
def _import(args: argparse.Namespace) -> int:
    """Import the runs of an export file into the store (created if it does not exist). The
    whole file is checked first (its format version, every record, every event through this
    stead's codec); a problem names the file and line and nothing is written. A run id the
    store holds is refused unless --new-ids."""
    out = Console(highlight=False)

    async def go() -> Imported:
        async with Runtime(open_store(args.store)) as rt:
            return await rt.import_runs(
                args.file, new_ids=args.new_ids, skip_existing=args.skip_existing
            )

    done = asyncio.run(go())
    for old, new in done.runs.items():
        out.print(Text(old if old == new else f"{old} -> {new}"))
    skipped = f", {len(done.skipped)} left as they were" if done.skipped else ""
    out.print(
        Text(f"imported {len(done.runs)} runs, {done.events} events, {done.blobs} blobs{skipped}")
    )
    return 0


def _duration(text: str) -> float:
    m = _SPAN.fullmatch(text.strip().lower())
    if not m:
        raise UserError(f"{text!r} is not a duration; write 90s, 15m, 2h, 30d or 1w")
    return float(m.group(1)) * _UNIT[m.group(2)]


def retention_of(keep: list[str] | None, max_runs: int | None, batch: int = 50) -> Retention:
    """A ``Retention`` from ``--keep STATUS=DURATION`` (repeated) and ``--max-runs N``."""
    seconds: dict[str, float] = {}
    for item in keep or ():
        status, sep, span = item.partition("=")
        if not sep:
            raise UserError(f"--keep {item!r}: write STATUS=DURATION, e.g. completed=30d")
        seconds[status.strip()] = _duration(span)
    if not seconds and max_runs is None:
        raise UserError("say what to keep: --keep completed=30d (per status) and/or --max-runs N")
    return Retention(keep=seconds, max_runs=max_runs, batch=batch)


def _prune_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep",
        action="append",
        metavar="STATUS=DURATION",
        help="keep finished runs of a status this long (completed=30d, failed=90d); repeat",
    )
    p.add_argument("--max-runs", type=positive(int, 10**9), default=None, help="per agent")
    p.add_argument("--batch", type=positive(int, 10_000), default=50, help="runs a transaction")
    p.add_argument("--apply", action="store_true", help="delete (without it: a dry run)")
    p.add_argument("--vacuum", action="store_true", help="then give SQLite's space back")
    p.add_argument("--json", action="store_true", help="one JSON object")


@runtime_command(
    "prune", "delete old finished runs (dry run by default)", _prune_arguments, run_id=False
)
async def _prune(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    """Delete the finished runs the policy lets go, with everything that belongs to them.
    Never a run that is queued, running, waiting on a tool or a person, held by a worker, or
    that a kept run was forked from or continues. Also the text streamed for watchers that
    no live process is behind any more (a writer killed mid-reply, a run since finished).
    Without --apply it only says what would go and about how much space that is."""
    if args.vacuum and not args.apply:
        raise UserError("--vacuum gives back the space --apply frees; pass both")
    policy = retention_of(args.keep, args.max_runs, args.batch)
    done = await rt.prune(policy, apply=args.apply, vacuum_after=args.vacuum)
    if args.json:
        print(
            json.dumps(
                {
                    "applied": done.applied,
                    "runs": [{"run_id": r, "why": why} for r, why in done.runs],
                    "bytes": done.bytes,
                    "blobs": done.blobs,
                    "streams": done.streams,
                }
            )
        )
        return 0
    for rid, why in done.runs:
        out.print(Text(f"{rid}  {why}"))
    verb = "pruned" if done.applied else "would prune"
    tail = "" if done.applied else " (a dry run: pass --apply to delete)"
    out.print(
        Text(
            f"{verb} {len(done.runs)} runs, {done.bytes / 1024:.1f} KiB of events; turns whose "
            f"shared streamed text no live writer is behind: {done.streams}{tail}"
        )
    )
    return 0


def _fork_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id")
    p.add_argument(
        "--at-turn",
        required=True,
        help="the source's last turn to carry, numbered from 1 as `stead runs show` numbers them",
    )
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--input", help="the new user message after that turn")
    given.add_argument(
        "--messages",
        metavar="FILE",
        help="a JSON list of messages to go on with instead (the last a user message; "
        "docs/lifecycle.md)",
    )
    p.add_argument("--agent", default=None, help="the agent that drives the fork (by name)")


@runtime_command("fork", "a new run from a run's history up to a turn", _fork_arguments)
async def _fork(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    """Make a new queued run whose history is RUN's up to the end of turn --at-turn, then
    --input. Nothing carried runs again; a call still in flight at that turn is not carried.
    A worker with the agent drives it (stead worker)."""
    try:
        turn = int(args.at_turn)
    except ValueError:
        raise UserError(
            f"--at-turn takes a turn number (1, 2, ...), not {args.at_turn!r}"
        ) from None
    if turn < 1:
        raise UserError(f"--at-turn counts turns from 1, as `stead runs show` does, not {turn}")
    messages = None
    if args.messages is not None:
        try:
            text = await asyncio.to_thread(Path(args.messages).read_text, encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read --messages {args.messages!r}: {exc}") from None
        try:
            messages = decode_messages(json.loads(text))
        except json.JSONDecodeError as exc:
            raise UserError(f"--messages {args.messages!r} is not JSON: {exc}") from None
    try:
        view = await rt.fork(
            args.run_id, at_turn=turn - 1, input=args.input, messages=messages, agent=args.agent
        )
    except TurnNotReached as exc:  # said in the numbers `stead runs show` uses
        reached = f"turns 1 to {exc.last + 1}" if exc.last >= 0 else "no turn yet"
        raise UserError(f"run {exc.run_id} has {reached}; --at-turn takes one of those") from None
    out.print(Text(view.run_id))
    return 0


def _copy_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="store URL to copy from")
    p.add_argument("target", help="store URL to copy into (must hold none of its runs)")


@command("copy", "copy a whole store into another (SQLite <-> PostgreSQL)", _copy_arguments)
def _copy(args: argparse.Namespace) -> int:
    """Copy every run, conversation, attachment and ledger row of one store into another,
    checked as an import is. Stop the workers of the source first: a run driven meanwhile is
    copied as it was when it was read."""
    from stead.runtime import copy_store

    done = asyncio.run(copy_store(args.source, args.target, now=time.time()))
    Console(highlight=False).print(
        Text(f"copied {len(done.runs)} runs, {done.events} events, {done.blobs} blobs")
    )
    return 0


RUNS_COMMANDS = (_export, _import, _prune, _fork)
"""The ``stead runs`` subcommands of this module."""

COMMANDS = (Command(name="store", help="whole stores", subcommands=(_copy,)),)
