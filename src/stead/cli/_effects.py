"""``stead effects list RUN`` and ``stead effects show RUN EFFECT``: a run's effects, one row
per key (``stead.core.effect_log``): how each ended, the reconciler's verdicts at takeovers,
its redispatches, and where it ran (``stead.store.placements``: the queue, executor,
epoch and claims of a key performed by an executor pool; in process when it has none).
Parsing and rendering only."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stead.cli._command import Command, runtime_command
from stead.cli._hints import Hints
from stead.cli._ids import short_id
from stead.cli._render import plain, timeline
from stead.core.effect_log import EffectRecord, effect_records
from stead.core.id_prefix import choose
from stead.errors import StoreError, UserError
from stead.runtime import Runtime
from stead.store import Placement, ledger_for, placements

_STYLE = {
    "settled": "green",
    "failed": "red",
    "disposed": "bold red",
    "unknown": "bold yellow",
    "in_flight": "cyan",
}


def _list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id")
    p.add_argument("--json", action="store_true", help="one JSON object per effect, per line")


def _show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id")
    p.add_argument(
        "effect_id",
        help="an effect id, or a start of one of at least 4 characters that starts no other",
    )
    p.add_argument("--json", action="store_true", help="the effect as one JSON object")


def _redispatches(r: EffectRecord) -> str:
    led = r.redispatch
    if not (led.planned or led.given_up):
        return ""
    text = f"{led.dispatched}/{led.planned} redispatched"
    if led.owed:
        text += f", {led.owed} owed"
    return text + (f", given up: {led.reason}" if led.given_up else "")


async def _placed(rt: Runtime, run_id: str) -> dict[str, Placement]:
    """The run's keys in the execution ledger (none for a store without one)."""
    try:
        ledger = ledger_for(rt.store)
    except StoreError:
        return {}
    try:
        return await placements(ledger, run_id)
    finally:
        await ledger.close()


def _where(p: Placement | None) -> str:
    if p is None:
        return "in process"
    text = f"{p.executor or '-'} ({p.queue}, epoch {p.epoch}"
    return text + (f", {p.attempts} attempts)" if p.attempts != 1 else ")")


def _placement_json(p: Placement | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {
        "phase": p.phase,
        "queue": p.queue,
        "executor": p.executor,
        "epoch": p.epoch,
        "attempts": p.attempts,
        "claims": [{"executor": x, "epoch": e} for x, e in p.claims],
    }


def _json(r: EffectRecord, p: Placement | None = None) -> dict[str, Any]:
    led = r.redispatch
    return {
        "effect_id": r.effect_id,
        "kind": r.kind,
        "turn_index": r.turn_index,
        "tool_call_id": r.tool_call_id,
        "name": r.name,
        "attempt": r.attempt,
        "state": r.state,
        "detail": r.detail,
        "verdicts": [
            {"verdict": v.verdict, "observed": v.observed, "reason": v.reason, "epoch": v.epoch}
            for v in r.verdicts
        ],
        "redispatch": {
            "planned": led.planned,
            "dispatched": led.dispatched,
            "owed": led.owed,
            "given_up": led.given_up,
            "reason": led.reason,
        },
        "seqs": r.seqs,
        "ledger": _placement_json(p),
    }


@runtime_command("show", "one effect: its events, verdicts and ledger", _show_arguments)
async def _show(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    stored = await rt.events(args.run_id)
    records = effect_records((s.seq, s.event) for s in stored)
    chosen = choose(args.effect_id, [r.effect_id for r in records], noun="effect")
    if chosen is None:
        raise UserError(
            f"no effect of run {args.run_id} starts with {args.effect_id!r}: "
            f"`{Hints.of(args).command('effects', 'list', short_id(args.run_id))}` shows their ids"
        )
    r = next(r for r in records if r.effect_id == chosen)
    p = (await _placed(rt, args.run_id)).get(r.effect_id)
    if args.json:
        print(json.dumps(_json(r, p), ensure_ascii=False))
        return 0
    title = f"{r.effect_id} {r.name} (turn {r.turn_index + 1}, attempt {r.attempt}): {r.state}"
    out.print(timeline([s for s in stored if s.seq in set(r.seqs)], title=title))
    if _redispatches(r):
        out.print(Text(f"redispatches: {_redispatches(r)}"))
    if p is not None:
        held = ", ".join(f"{x} at epoch {e}" for x, e in p.claims) or "never claimed"
        out.print(Text(plain(f"ran at: {_where(p)}, {p.phase}; claims: {held}")))
    return 0


@runtime_command("list", "every effect of a run, one row per key", _list_arguments)
async def _list(rt: Runtime, args: argparse.Namespace, out: Console) -> int:
    stored = await rt.events(args.run_id)
    records = effect_records((s.seq, s.event) for s in stored)
    placed = await _placed(rt, args.run_id)
    if args.json:
        for r in records:
            print(json.dumps(_json(r, placed.get(r.effect_id)), ensure_ascii=False))
        return 0
    table = Table(title=Text(plain(args.run_id)), show_edge=False, header_style="bold")
    columns = ("effect", "turn", "what", "attempt", "state", "ran at", "verdicts", "redispatch")
    for col in (*columns, "detail"):
        table.add_column(col)
    for r in records:
        verdicts = ", ".join(f"{v.verdict} ({v.observed})" for v in r.verdicts)
        table.add_row(
            r.effect_id[:12],
            str(r.turn_index + 1),  # from 1, as the timeline counts turns
            Text(plain(f"{r.name} {r.tool_call_id}".strip())),
            str(r.attempt),
            Text(r.state, style=_STYLE[r.state]),
            Text(plain(_where(placed.get(r.effect_id)))),
            verdicts,
            _redispatches(r),
            Text(plain(r.detail)[:60]),
        )
    out.print(table)
    return 0


COMMANDS = (
    Command(
        name="effects",
        help="a run's effects: model and tool calls, by key",
        subcommands=(_list, _show),
    ),
)
