"""Render runs for people: a list of runs, and one run's timeline.

The timeline says in words what each event means ("recovered: reconcile found the message"),
so a person can see why a run is where it is without knowing the event schema.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stead.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageRecorded,
    Event,
    LoopDetected,
    ModelCallFailed,
    NoticeInjected,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunRecovered,
    RunRequeued,
    RunStarted,
    RunTimedOut,
    StepFailed,
    ToolCallRequested,
    ToolCallStarted,
    ToolOutcomeUnknown,
    ToolReconciled,
    ToolResultRecorded,
    TurnResumed,
    TurnStarted,
)
from stead.runtime import RunView
from stead.store import RunRecord, StoredEvent

STATUS_STYLE = {
    "queued": "cyan",
    "running": "blue",
    "awaiting_tool": "blue",
    "awaiting_approval": "yellow",
    "completed": "green",
    "failed": "red",
    "cancelled": "magenta",
    "timed_out": "magenta",
}


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(32), 127) if chr(c) not in "\n\t"}
"""Control characters shown as escapes: an ESC from a model's text must not drive the
reader's terminal (colours, cursor moves, a cleared screen, a retitled window)."""


def plain(text: str) -> str:
    """Stored text made safe to print: control characters (but newline and tab) escaped, and
    what cannot be encoded as UTF-8 (a lone surrogate) replaced. Print it as a rich ``Text``,
    never as a markup string: ``[word]`` in a prompt or a tool's output is text, not style."""
    text = text.translate(_CONTROL)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _short(text: str, n: int = 80) -> str:
    text = " ".join(plain(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _args(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return arguments


def describe(event: Event) -> tuple[str, str, str]:
    """(label, detail, style) for one event."""
    match event:
        case RunCreated():
            return "created", f"agent {event.agent}: {_short(event.input)}", "cyan"
        case RunStarted():
            return "started", f"worker {event.owner} (epoch {event.epoch})", "blue"
        case RunRecovered():
            prev = f" from {event.previous_owner}" if event.previous_owner else ""
            return (
                "recovered",
                f"worker {event.owner} took over{prev} (epoch {event.epoch})",
                "bold yellow",
            )
        case TurnStarted():
            return f"turn {event.turn_index}", "model call", "blue"
        case TurnResumed():
            return f"turn {event.turn_index}", "resumed with unfinished tool calls", "yellow"
        case NoticeInjected():
            return "notice", f"{event.reason}: {_short(event.content, 70)}", "yellow"
        case LoopDetected():
            return (
                "loop",
                f"{event.name} called {event.repeats}× in a row with the same arguments; not run",
                "bold red",
            )
        case RunCancelRequested():
            by = f" by {event.by}" if event.by else ""
            return "cancel?", f"requested{by}: {event.reason}", "magenta"
        case ModelCallFailed():
            return (
                "model failed",
                f"attempt {event.attempt}: {event.code} {_short(event.message, 60)}",
                "red",
            )
        case AssistantMessageRecorded():
            calls = ", ".join(c.name for c in event.message.tool_calls)
            text = _short(event.message.text, 60) if event.message.text else ""
            detail = " ".join(
                p for p in (f'"{text}"' if text else "", f"→ {calls}" if calls else "") if p
            )
            u = event.usage
            return "assistant", f"{detail}  [{u.input_tokens} in / {u.output_tokens} out]", "white"
        case ToolCallRequested():
            if event.rejection:
                return "intent", f"{event.name} refused: {_short(event.rejection, 60)}", "red"
            return (
                "intent",
                f"{event.name}({_short(_args(event.arguments), 50)}) {event.effect_class}",
                "white",
            )
        case ToolCallStarted():
            return "tool start", f"{event.tool_call_id} attempt {event.attempt}", "dim"
        case ToolResultRecorded():
            how = {
                "executed": "",
                "reconciled": " (recovered by reconcile)",
                "approval": " (a person decided)",
                "rejected": " (refused)",
                "cancelled": " (cancelled)",
            }.get(event.source, f" ({event.source})")
            style = "red" if event.is_error else "green"
            return "result", f"{event.name} → {_short(event.content, 60)}{how}", style
        case ToolOutcomeUnknown():
            return "unknown", f"{event.tool_call_id}: {event.reason}", "bold red"
        case ToolReconciled():
            return (
                "reconciled",
                f"{event.tool_call_id}: {event.verdict.replace('_', ' ')}",
                "yellow",
            )
        case ApprovalRequested():
            return (
                "approval?",
                f"{event.tool_call_id} ({event.reason}) token {event.token}",
                "bold yellow",
            )
        case ApprovalDecided():
            by = f" by {event.by}" if event.by else ""
            return (
                "decided",
                f"{event.tool_call_id}: {event.decision}{by} {event.reason}".rstrip(),
                "yellow",
            )
        case RunCompleted():
            return "completed", _short(event.output), "bold green"
        case RunFailed():
            return (
                "failed",
                f"{event.code} in {event.phase}: {_short(event.message, 160)}",
                "bold red",
            )
        case StepFailed():
            return (
                "step failed",
                f"{event.step}: {event.error_type}: {_short(event.message, 120)}",
                "red",
            )
        case RunCancelled():
            return "cancelled", event.reason, "magenta"
        case RunTimedOut():
            return "timed out", event.reason, "magenta"
        case RunRequeued():
            return "requeued", event.reason, "cyan"
    return event.kind, "", "white"  # pragma: no cover


def timeline(events: Sequence[StoredEvent], title: str = "") -> Table:
    """One run's events as a table: seq, time since start, what happened."""
    table = Table(title=Text(plain(title)) if title else None, show_edge=False, header_style="bold")
    table.add_column("seq", justify="right", style="dim")
    table.add_column("+ms", justify="right", style="dim")
    table.add_column("event")
    table.add_column("detail", overflow="fold")
    t0 = events[0].created_at if events else 0.0
    for stored in events:
        label, detail, style = describe(stored.event)
        table.add_row(
            str(stored.seq),
            f"{(stored.created_at - t0) * 1000:.0f}",
            Text(plain(label), style=style),
            Text(plain(detail)),
        )
    return table


def runs_table(records: Sequence[RunRecord]) -> Table:
    """A list of runs."""
    table = Table(show_edge=False, header_style="bold")
    for col in ("run", "agent", "status", "events", "updated"):
        table.add_column(col)
    for r in records:
        when = dt.datetime.fromtimestamp(r.updated_at).strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(
            Text(plain(r.run_id)),
            Text(plain(r.agent)),
            Text(plain(r.status), style=STATUS_STYLE.get(r.status, "")),
            str(r.last_seq),
            when,
        )
    return table


def summary(view: RunView) -> Text:
    """One line: status, output or error, usage, pending approvals."""
    t = Text()
    t.append(view.status.value, style=STATUS_STYLE.get(view.status.value, ""))
    if view.output:
        t.append(f"  {_short(view.output)}")
    if view.error:
        t.append(
            f"  {view.error.get('code')}: {_short(str(view.error.get('message', '')))}", style="red"
        )
    u = view.usage
    t.append(
        f"  [{view.turns} turns, {u.input_tokens} in / {u.output_tokens} out tokens]", style="dim"
    )
    for a in view.approvals:
        t.append(
            plain(
                f"\n  waiting on a person: call {a.tool_call_id} ({a.tool}, {a.reason})"
                f" token {a.token}"
            ),
            style="yellow",
        )
    return t


class _Console(Console):
    """rich's console, but a closed pipe is a ``BrokenPipeError`` for ``stead.cli.main`` to
    end quietly like any other write to stdout (rich would exit 1 by itself)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def console() -> Console:
    """The console everything prints to: the terminal's width, or ``$COLUMNS``; 120 when
    piped without ``$COLUMNS`` (wide enough for a timeline in a file)."""
    import os  # here, not at the top: keeps this change apart from the module's imports

    probe = Console()
    sized = probe.is_terminal or os.environ.get("COLUMNS", "").isdigit()
    return _Console(highlight=False, width=None if sized else 120)
