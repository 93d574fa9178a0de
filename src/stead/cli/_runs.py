"""``stead runs list|show|events|watch``: read the runs of the store."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from rich.console import Console
from rich.text import Text

from stead.cli._args import positive
from stead.cli._command import Command, runtime_command
from stead.cli._hints import Hints
from stead.cli._ids import short_id
from stead.cli._lifecycle import RUNS_COMMANDS
from stead.cli._render import plain, summary, timeline
from stead.cli._tree import tree_json, tree_table
from stead.core.event_codec import encode
from stead.core.states import RunStatus
from stead.errors import CorruptEvent, IllegalTransition
from stead.runtime import Runtime

STATUSES = [s.value for s in RunStatus]
"""What ``runs list --status`` takes."""


def _list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--status", default=None, choices=STATUSES, help="only runs in this status")
    p.add_argument("--agent", default=None, help="only runs of the agent with this name")
    p.add_argument(
        "--conversation", default=None, help="the runs answering a conversation, in its order"
    )
    p.add_argument(
        "--since",
        default=None,
        help="only runs active since: a span (90s, 15m, 2h, 3d, 1w) or an ISO date or time",
    )
    p.add_argument("--limit", type=positive(int, 100_000), default=50, help="at most this many")
    p.add_argument("--json", action="store_true", help="one JSON object per run, per line")


@runtime_command("list", "runs, newest first", _list_arguments, run_id=False)
async def _list(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    # Filtered by status, agent and activity, newest activity first.
    import time

    from stead.cli._list import damaged_row, load_row, row_json, runs_table, since

    now = time.time()
    cutoff = since(args.since, now) if args.since is not None else None
    if args.conversation is not None:
        from stead.cli._list import conversation_records

        records = await conversation_records(rt, args.conversation, args.status, args.agent)
    else:
        records = await rt.list_runs(
            status=args.status, agent=args.agent, limit=args.limit if cutoff is None else 10_000
        )
    if cutoff is not None:
        records = [r for r in records if r.updated_at >= cutoff][: args.limit]
    rows = []
    for r in records:
        try:
            rows.append(await load_row(rt, r))
        except (CorruptEvent, IllegalTransition) as why:  # one damaged run hides no other
            rows.append(damaged_row(r, why))
    if args.json:
        from stead.store.lifecycle import stranded

        waits = {s.run_id: s.fingerprint for s in await stranded(rt.store, now=now)}
        for row in rows:
            shown = row_json(row, now)
            if row.record.run_id in waits:  # pinned to a version no live worker has
                shown["waits_for_version"] = waits[row.record.run_id]
            print(json.dumps(shown, ensure_ascii=False))
    else:
        out.print(runs_table(rows, now, width=out.width))
        await _stranded(rt, now, out)
    for row in rows:
        if row.damaged:  # the list is whole; what it could not read is said, not hidden
            err = Console(stderr=True, highlight=False, soft_wrap=True)
            show = Hints.of(args).command("runs", "show", short_id(row.record.run_id))
            err.print(Text(f"damaged: {plain(row.damaged)}; `{show}` names the row"))
    return 0


async def _stranded(rt: Runtime, now: float, out: Console) -> None:
    """Runs pinned to an agent version no live worker drives: nothing takes them until a
    worker of that version starts (docs/lifecycle.md)."""
    from stead.store.lifecycle import stranded

    for s in await stranded(rt.store, now=now):
        out.print(
            Text(
                f"{s.run_id} waits for agent {s.agent} at {s.fingerprint}: no live worker "
                "has that version (start one, or resume it under another policy)",
                style="yellow",
            )
        )


def _one_run(json_help: str) -> Callable[[argparse.ArgumentParser], None]:
    def arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("run_id")
        if json_help:
            p.add_argument("--json", action="store_true", help=json_help)

    return arguments


@runtime_command("show", "a run's timeline", _one_run("the run as one JSON object"))
async def _show(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    if args.json:
        from stead.cli._list import load_row, show_json

        row = await load_row(rt, await rt.store.get_run(args.run_id))
        shown = show_json(row)
        parents = (await rt.get(args.run_id)).parents
        tree = await rt.tree(parents[-1] if parents else args.run_id)
        if tree.children:
            shown["tree"] = tree_json(tree)
        print(json.dumps(shown, ensure_ascii=False))
        return 0
    view = await rt.get(args.run_id)
    out.print(timeline(await rt.events(args.run_id), title=args.run_id))
    hints = Hints.of(args).for_run((await rt.state(args.run_id)).config)
    out.print(summary(view, hints))
    tree = await rt.tree(view.parents[-1] if view.parents else args.run_id)
    if tree.children:
        out.print(tree_table(tree, args.run_id))
    return 0


@runtime_command("events", "a run's raw events", _one_run("one JSON object per line"))
async def _events(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    for e in await rt.events(args.run_id):
        kind, version, data = encode(e.event)
        if args.json:
            row = {"seq": e.seq, "kind": kind, "v": version, "at": e.created_at, "data": data}
            print(json.dumps(row))
        else:
            out.print(Text(f"{e.seq:>5} {kind:<22} {json.dumps(data)[:160]}"))
    return 0


@runtime_command("watch", "follow a run live until it rests", _one_run(""))
async def _watch(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    """Follow a run live: its timeline grows as events are appended by any process (a worker
    elsewhere included), until the run completes, fails, is cancelled, times out or waits on
    a person; then its final state. Streamed text exists only in the process driving the
    run, so from another process each reply appears when its turn is recorded. Ctrl-C stops
    watching (the run goes on). Exit 0 when the run completed or waits on a person, 1
    otherwise."""
    from stead.cli._watch import watch

    return await watch(rt, args.run_id, out, Hints.of(args))


COMMANDS = (
    Command(
        name="runs",
        help="list, inspect, export, import, prune and fork runs",
        subcommands=(_list, _show, _events, _watch, *RUNS_COMMANDS),
    ),
)
