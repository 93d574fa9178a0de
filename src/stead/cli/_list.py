"""``stead runs list`` and ``runs show --json``: one row per run that fits 80 columns.

Each row is folded from the run's log (turns, tokens) and priced from the model each reply
names (``AssistantMessageRecorded.model``), so the list needs no agent module: a person reads
any store. A reply from a model the price table does not know makes the cost unknown ("?"),
never a wrong number.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from stead.cli._ids import short_id
from stead.cli._render import STATUS_STYLE, plain
from stead.core.events import AssistantMessageRecorded
from stead.core.fold import RunState, apply
from stead.core.pricing import PRICES
from stead.core.states import RunStatus
from stead.errors import IllegalTransition, RunNotFound, StoreError, UserError
from stead.runtime import Runtime, RunView
from stead.store import RunRecord


@dataclass(frozen=True, slots=True)
class Row:
    """One run as the list shows it."""

    record: RunRecord
    view: RunView
    state: RunState
    cost: float | None
    damaged: str | None = None
    """Why its log could not be read (a row that does not decode or does not follow from
    the ones before it); its view is then empty and only the runs table's columns count."""


def damaged_row(record: RunRecord, why: StoreError | IllegalTransition) -> Row:
    """A run whose log cannot be folded, as one row of the list: the rest of the store is
    still listed, and this run is marked, naming what is wrong (``stead runs show`` then
    names the row)."""
    state = RunState()  # a stand-in the list never shows (its status is DAMAGED)
    state.run_id, state.agent, state.status = record.run_id, record.agent, RunStatus.FAILED
    return Row(record=record, view=RunView.of(state), state=state, cost=None, damaged=str(why))


async def load_row(rt: Runtime, record: RunRecord) -> Row:
    """Fold the run's log once: its view, its state (for ``show --json``) and its cost."""
    state = RunState()
    cost: float | None = 0.0
    for stored in await rt.events(record.run_id):
        apply(state, stored.event, stored.seq)
        e = stored.event
        if isinstance(e, AssistantMessageRecorded) and cost is not None:
            dollars = PRICES.cost(e.usage, e.model)
            cost = None if dollars is None else cost + dollars
    return Row(record=record, view=RunView.of(state), state=state, cost=cost)


async def conversation_records(
    rt: Runtime, conversation: str, status: str | None, agent: str | None
) -> list[RunRecord]:
    """``--conversation``: the runs answering its messages, in the conversation's order (a
    message whose run is not created yet, because the one before is being answered, is not
    a run yet and is left out)."""
    out = []
    for entry in await rt.conversation(conversation):
        try:
            record = await rt.store.get_run(entry.run_id)
        except RunNotFound:
            continue
        if (status is None or record.status == status) and (agent is None or record.agent == agent):
            out.append(record)
    if not out and not await rt.conversation(conversation):
        raise UserError(
            f"no conversation {conversation!r} in this store; `stead runs list --json` shows "
            "each run's session_id, which is its conversation"
        )
    return out


_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.ASCII)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_LONGEST = 1000 * 366 * 86400.0
"""The longest span ``--since`` takes (a float beyond it is a typo, or infinite)."""


def since(text: str, now: float) -> float:
    """``--since``: a span back from now (``90s``, ``15m``, ``2h``, ``3d``, ``1w``) or an ISO
    date or time (``2026-11-30``, ``2026-11-30T18:00``; local time unless it names a zone)."""
    span = _SPAN.fullmatch(text.strip().lower())
    if span:
        seconds = float(span.group(1)) * _UNIT[span.group(2)]
        if not seconds <= _LONGEST:  # NaN-safe; 1e400w is infinite
            raise UserError(f"--since {text!r} reaches back more than 1000 years; pass less")
        return now - seconds
    try:
        when = dt.datetime.fromisoformat(text.strip())
        return when.timestamp()
    except (ValueError, OverflowError, OSError):
        raise UserError(
            f"--since {text!r} is neither a span (90s, 15m, 2h, 3d, 1w) nor an ISO date "
            "(2026-11-30, 2026-11-30T18:00)"
        ) from None


def span(seconds: float) -> str:
    """A duration in at most 5 characters: 850ms, 12.3s, 14m, 5h, 3d."""
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


def count(n: int) -> str:
    """A token count in at most 5 characters: 812, 12.3k, 4.1M."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k" if n < 100_000 else f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"


def money(cost: float | None) -> str:
    """Dollars in at most 7 characters, or ``?`` when a reply came from a model without a
    known price: cents from a cent up, ``<$0.01`` below, ``$0`` for nothing spent."""
    if cost is None:
        return "?"
    if cost == 0:
        return "$0"
    if cost < 0.01:
        return "<$0.01"
    return f"${cost:,.2f}" if cost < 1000 else f"${cost:,.0f}"


DROPPED_FIRST = ("took", "turns", "tokens", "age", "cost")
"""The columns given up, in this order, when a row does not fit the width: the least useful
first. A number is never cut: its column is shown whole or not at all."""

AGENT_AT_LEAST = 8
"""The agent's column is never narrower than this while a number column can still go."""


def runs_table(rows: list[Row], now: float | None = None, width: int = 80) -> Table:
    """The list: short id, agent, status, age, duration, turns, tokens, cost.

    Every cell is one line and the row fits ``width``: each column is as wide as its widest
    cell; when they do not fit, the least useful number columns are left out
    (``DROPPED_FIRST``) before the agent is cut (with an ellipsis) below ``AGENT_AT_LEAST``;
    an id longer than its column (a chosen one) is folded instead of cut, so it can still be
    copied."""
    now = time.time() if now is None else now
    cells: dict[str, list[str]] = {name: [] for name in DROPPED_FIRST}
    for row in rows:
        r, v = row.record, row.view
        cells["age"].append(span(now - r.created_at))
        cells["took"].append(span(r.updated_at - r.created_at))
        cells["turns"].append("?" if row.damaged else f"{v.turns:,}")
        cells["tokens"].append(
            "?" if row.damaged else count(v.usage.input_tokens + v.usage.output_tokens)
        )
        cells["cost"].append(money(row.cost))
    widths = {name: max([len(name), *(len(c) for c in cells[name])]) for name in DROPPED_FIRST}
    statuses = [_status(r) for r in rows] or ["status"]
    fixed = {"run": 12, "status": max(6, *(len(s) for s in statuses))}
    shown = ["age", "took", "turns", "tokens", "cost"]
    longest_agent = max([5, *(len(plain(r.record.agent)) for r in rows)])

    def room(columns: list[str]) -> int:
        # SIMPLE_HEAD without edges: three spaces between columns (padding, rule, padding).
        used = sum(fixed.values()) + sum(widths[n] for n in columns)
        return width - used - 3 * (len(fixed) + len(columns))

    for name in DROPPED_FIRST:
        if room(shown) >= min(AGENT_AT_LEAST, longest_agent):
            break
        shown.remove(name)
    agent = max(5, room(shown))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("run", overflow="fold", width=fixed["run"])
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=agent)
    table.add_column("status", no_wrap=True, width=fixed["status"])
    for name in shown:
        table.add_column(name, justify="right", no_wrap=True, min_width=widths[name])
    for i, row in enumerate(rows):
        r = row.record
        status = _status(row)
        table.add_row(
            Text(plain(short_id(r.run_id))),
            Text(plain(r.agent)),
            Text(status, style="bold red" if row.damaged else STATUS_STYLE.get(status, "")),
            *(cells[name][i] for name in shown),
        )
    return table


def _status(row: Row) -> str:
    return "DAMAGED" if row.damaged else row.view.status.value


def row_json(row: Row, now: float | None = None) -> dict[str, Any]:
    """One run for ``--json`` (a stable shape for scripts: seconds, not formatted spans)."""
    now = time.time() if now is None else now
    r, v = row.record, row.view
    u = v.usage
    if row.damaged:
        return {
            "run_id": r.run_id,
            "short_id": short_id(r.run_id),
            "agent": r.agent,
            "status": r.status,
            "damaged": row.damaged,
            "session_id": r.session_id,
            "correlation_id": r.correlation_id,
            "created_at": r.created_at,
            "updated_at": r.updated_at,
            "age_s": now - r.created_at,
            "duration_s": r.updated_at - r.created_at,
            "events": r.last_seq,
        }
    return {
        "run_id": r.run_id,
        "short_id": short_id(r.run_id),
        "agent": r.agent,
        "status": v.status.value,
        "session_id": r.session_id,
        "correlation_id": r.correlation_id,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "age_s": now - r.created_at,
        "duration_s": r.updated_at - r.created_at,
        "events": v.seq,
        "turns": v.turns,
        "usage": {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_creation_input_tokens": u.cache_creation_input_tokens,
            "cache_read_input_tokens": u.cache_read_input_tokens,
        },
        "cost_usd": row.cost,
    }


def show_json(row: Row) -> dict[str, Any]:
    """``runs show --json``: the list's fields, the input and outcome, pending approvals."""
    v = row.view
    return {
        **row_json(row),
        "input": row.state.input,
        "output": v.output,
        "stop_reason": v.stop_reason,
        "error": v.error,
        "approvals": [
            {
                "tool_call_id": a.tool_call_id,
                "tool": a.tool,
                "reason": a.reason,
                "token": a.token,
                "payload": a.payload,
            }
            for a in v.approvals
        ],
    }
