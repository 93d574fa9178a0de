"""Render runs for people: a list of runs, and one run's timeline.

The timeline says in words what each event means ("recovered: reconcile found the message"),
so a person can see why a run is where it is without knowing the event schema.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, TypeVar

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stead.core.canonical import digest
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
    ToolsListed,
    TraceLinked,
    TurnResumed,
    TurnStarted,
    encode,
)
from stead.core.states import RunStatus
from stead.runtime import RunView
from stead.store import RunRecord, StoredEvent

STATUS_STYLE: dict[str, str] = {
    RunStatus.QUEUED: "cyan",
    RunStatus.RUNNING: "blue",
    RunStatus.AWAITING_TOOL: "blue",
    RunStatus.AWAITING_APPROVAL: "yellow",
    RunStatus.COMPLETED: "green",
    RunStatus.FAILED: "red",
    RunStatus.CANCELLED: "magenta",
    RunStatus.TIMED_OUT: "magenta",
}
"""The colour of each status (keyed by ``RunStatus``, which is its string)."""


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


Described: TypeAlias = tuple[str, str, str]
E = TypeVar("E", bound=Event)
DESCRIBE: dict[str, Callable[[Any], Described]] = {}
"""event kind -> (label, detail, style) of one event of that kind, for the timeline. A kind
without an entry is shown by ``generic``: every field, never nothing."""


def renders(cls: type[E]) -> Callable[[Callable[[E], Described]], Callable[[E], Described]]:
    """Register how ``cls`` events read in the timeline."""

    def register(fn: Callable[[E], Described]) -> Callable[[E], Described]:
        DESCRIBE[cls.kind] = fn
        return fn

    return register


def describe(event: Event) -> Described:
    """(label, detail, style) for one event: its entry in ``DESCRIBE``, else ``generic``."""
    render = DESCRIBE.get(event.kind)
    return render(event) if render is not None else generic(event)


def generic(event: Event) -> Described:
    """An event with no words of its own yet: its kind and every field, as stored."""
    _, _, data = encode(event)
    return event.kind.replace("_", " "), _short(json.dumps(data, ensure_ascii=False), 160), "white"


@renders(RunCreated)
def _created(e: RunCreated) -> Described:
    return "created", f"agent {e.agent}: {_short(e.input)}", "cyan"


@renders(RunStarted)
def _started(e: RunStarted) -> Described:
    return "started", f"worker {e.owner} (epoch {e.epoch})", "blue"


@renders(RunRecovered)
def _recovered(e: RunRecovered) -> Described:
    prev = f" from {e.previous_owner}" if e.previous_owner else ""
    return "recovered", f"worker {e.owner} took over{prev} (epoch {e.epoch})", "bold yellow"


@renders(TurnStarted)
def _turn_started(e: TurnStarted) -> Described:
    return f"turn {e.turn_index}", "model call", "blue"


@renders(TurnResumed)
def _turn_resumed(e: TurnResumed) -> Described:
    return f"turn {e.turn_index}", "resumed with unfinished tool calls", "yellow"


@renders(NoticeInjected)
def _notice(e: NoticeInjected) -> Described:
    return "notice", f"{e.reason}: {_short(e.content, 70)}", "yellow"


@renders(LoopDetected)
def _loop(e: LoopDetected) -> Described:
    what = f"{e.name} called {e.repeats}× in a row with the same arguments; not run"
    return "loop", what, "bold red"


@renders(RunCancelRequested)
def _cancel_requested(e: RunCancelRequested) -> Described:
    by = f" by {e.by}" if e.by else ""
    return "cancel?", f"requested{by}: {e.reason}", "magenta"


@renders(ModelCallFailed)
def _model_failed(e: ModelCallFailed) -> Described:
    return "model failed", f"attempt {e.attempt}: {e.code} {_short(e.message, 60)}", "red"


@renders(AssistantMessageRecorded)
def _reply(e: AssistantMessageRecorded) -> Described:
    calls = ", ".join(c.name for c in e.message.tool_calls)
    text = _short(e.message.text, 60) if e.message.text else ""
    detail = " ".join(p for p in (f'"{text}"' if text else "", f"→ {calls}" if calls else "") if p)
    u = e.usage
    return "assistant", f"{detail}  [{u.input_tokens} in / {u.output_tokens} out]", "white"


@renders(ToolCallRequested)
def _requested(e: ToolCallRequested) -> Described:
    if e.rejection:
        return "intent", f"{e.name} refused: {_short(e.rejection, 60)}", "red"
    return "intent", f"{e.name}({_short(_args(e.arguments), 50)}) {e.effect_class}", "white"


@renders(ToolCallStarted)
def _call_started(e: ToolCallStarted) -> Described:
    return "tool start", f"{e.tool_call_id} attempt {e.attempt}", "dim"


_SOURCE = {
    "executed": "",
    "reconciled": " (recovered by reconcile)",
    "approval": " (a person decided)",
    "rejected": " (refused)",
    "cancelled": " (cancelled)",
}


@renders(ToolResultRecorded)
def _result(e: ToolResultRecorded) -> Described:
    how = _SOURCE.get(e.source, f" ({e.source})")
    style = "red" if e.is_error else "green"
    return "result", f"{e.name} → {_short(e.content, 60)}{how}", style


@renders(ToolOutcomeUnknown)
def _unknown(e: ToolOutcomeUnknown) -> Described:
    return "unknown", f"{e.tool_call_id}: {e.reason}", "bold red"


@renders(ToolReconciled)
def _reconciled(e: ToolReconciled) -> Described:
    return "reconciled", f"{e.tool_call_id}: {e.verdict.replace('_', ' ')}", "yellow"


@renders(ApprovalRequested)
def _approval_requested(e: ApprovalRequested) -> Described:
    return "approval?", f"{e.tool_call_id} ({e.reason}) token {e.token}", "bold yellow"


@renders(ApprovalDecided)
def _decided(e: ApprovalDecided) -> Described:
    by = f" by {e.by}" if e.by else ""
    return "decided", f"{e.tool_call_id}: {e.decision}{by} {e.reason}".rstrip(), "yellow"


@renders(RunCompleted)
def _completed(e: RunCompleted) -> Described:
    return "completed", _short(e.output), "bold green"


@renders(RunFailed)
def _failed(e: RunFailed) -> Described:
    return "failed", f"{e.code} in {e.phase}: {_short(e.message, 160)}", "bold red"


@renders(StepFailed)
def _step_failed(e: StepFailed) -> Described:
    return "step failed", f"{e.step}: {e.error_type}: {_short(e.message, 120)}", "red"


@renders(ToolsListed)
def _tools_listed(e: ToolsListed) -> Described:
    # Each tool with a short digest of its definition: a changed one reads differently.
    tools = ", ".join(f"{name}@{digest(d)[:6]}" for name, d in e.tools.items())
    return "tools listed", f"{e.source}: {tools or 'none'}", "cyan"


@renders(TraceLinked)
def _trace_linked(e: TraceLinked) -> Described:
    return "trace", e.traceparent, "dim"


@renders(RunCancelled)
def _cancelled(e: RunCancelled) -> Described:
    return "cancelled", e.reason, "magenta"


@renders(RunTimedOut)
def _timed_out(e: RunTimedOut) -> Described:
    return "timed out", e.reason, "magenta"


@renders(RunRequeued)
def _requeued(e: RunRequeued) -> Described:
    return "requeued", e.reason, "cyan"


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
