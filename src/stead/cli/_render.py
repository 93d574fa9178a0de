"""Render runs for people: a list of runs, and one run's timeline.

The timeline says in words what each event means ("recovered: reconcile found the message"),
so a person can see why a run is where it is without knowing the event schema.
"""

from __future__ import annotations

import datetime as dt
import json
import string
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeAlias, TypeVar

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stead.cli._hints import Hints
from stead.cli._ids import short_id
from stead.core import events as ev
from stead.core.canonical import digest
from stead.core.event_codec import encode
from stead.core.events import Event
from stead.core.states import RunStatus
from stead.runtime import PendingApproval, RunView
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


_LINES: Final[dict[type[Event], Described]] = {
    ev.RunStarted: ("started", "worker {e.owner} (epoch {e.epoch})", "blue"),
    ev.NoticeInjected: ("notice", "{e.reason}: {e.content:70}", "yellow"),
    ev.ModelCallFailed: ("model failed", "attempt {e.attempt}: {e.code} {e.message:60}", "red"),
    ev.ToolCallStarted: ("tool start", "{e.tool_call_id} attempt {e.attempt}", "dim"),
    ev.ToolOutcomeUnknown: (
        "outcome unknown",
        "call {e.tool_call_id} may or may not have happened ({e.reason:80}); its effect class "
        "decides what comes next",
        "bold red",
    ),
    ev.ToolCallDeferred: (
        "tool asks",
        "call {e.tool_call_id} attempt {e.attempt} did not act: it asks a person for {e.ask} "
        "{e.reason:80}",
        "yellow",
    ),
    ev.RunCompleted: ("completed", "{e.output:80}", "bold green"),
    ev.RunFailed: ("failed", "{e.code} in {e.phase}: {e.message:160}", "bold red"),
    ev.StepFailed: ("step failed", "{e.step}: {e.error_type}: {e.message:120}", "red"),
    ev.RunCancelled: ("cancelled", "{e.reason}", "magenta"),
    ev.RunTimedOut: ("timed out", "{e.reason}", "magenta"),
    ev.RunRequeued: ("requeued", "{e.reason}", "cyan"),
}
"""Events whose line is only their fields in words: (label, detail, style), the first two
templates of the event ``e`` for ``_WORDS`` (a field's value is put in, never read as a
template; ``{e.field:N}`` is the text shortened to N characters on one line). An event whose
words depend on its values has a ``@renders`` function below."""


class _Words(string.Formatter):
    """``str.format`` but for the width of a text field, which shortens it (``_short``)."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, str) and format_spec.isdigit():
            return _short(value, int(format_spec))
        return super().format_field(value, format_spec)  # type: ignore[no-any-return]


_WORDS: Final = _Words()


def _by(who: str) -> str:
    """`` by WHO`` when a request or decision says who made it."""
    return f" by {who}" if who else ""


def _line(label: str, detail: str, style: str) -> Callable[[Any], Described]:
    return lambda e: (_WORDS.format(label, e=e), _WORDS.format(detail, e=e), style)


for _cls, _words in _LINES.items():
    DESCRIBE[_cls.kind] = _line(*_words)


@renders(ev.TurnStarted)
def _turn(e: ev.TurnStarted) -> Described:
    # People count turns from 1, as the dashboard does; ``turn_index`` (data) from 0.
    return f"turn {e.turn_index + 1}", "model call", "blue"


@renders(ev.TurnResumed)
def _turn_resumed(e: ev.TurnResumed) -> Described:
    return f"turn {e.turn_index + 1}", "resumed with unfinished tool calls", "yellow"


@renders(ev.RunCreated)
def _created(e: ev.RunCreated) -> Described:
    said = f"agent {e.agent}: {_short(e.input)}"
    if e.attachments:
        said += f" (+{len(e.attachments)} attachment{'s' if len(e.attachments) > 1 else ''})"
    if e.session_id:  # a conversation's message: which one, after how much
        said += f" [conversation {e.session_id}, after {len(e.history)} messages]"
    return "created", said, "cyan"


@renders(ev.RunRecovered)
def _recovered(e: ev.RunRecovered) -> Described:
    prev = f" from {e.previous_owner}" if e.previous_owner else ""
    return "recovered", f"worker {e.owner} took over{prev} (epoch {e.epoch})", "bold yellow"


@renders(ev.LoopDetected)
def _loop(e: ev.LoopDetected) -> Described:
    what = f"{e.name} called {e.repeats}× in a row with the same arguments; not run"
    return "loop", what, "bold red"


@renders(ev.RunCancelRequested)
def _cancel_requested(e: ev.RunCancelRequested) -> Described:
    return "cancel?", f"requested{_by(e.by)}: {e.reason}", "magenta"


@renders(ev.AssistantMessageRecorded)
def _reply(e: ev.AssistantMessageRecorded) -> Described:
    calls = ", ".join(c.name for c in e.message.tool_calls)
    text = _short(e.message.text, 60) if e.message.text else ""
    detail = " ".join(p for p in (f'"{text}"' if text else "", f"→ {calls}" if calls else "") if p)
    u = e.usage
    shown = ", ".join(f"{k}={v}" for k, v in (e.settings or {}).items())
    sent = f"  {{{_short(shown, 120)}}}" if shown else ""
    return "assistant", f"{detail}  [{u.input_tokens} in / {u.output_tokens} out]{sent}", "white"


@renders(ev.ToolCallRequested)
def _requested(e: ev.ToolCallRequested) -> Described:
    if e.rejection:
        return "intent", f"{e.name} refused: {_short(e.rejection, 60)}", "red"
    return "intent", f"{e.name}({_short(_args(e.arguments), 50)}) {e.effect_class}", "white"


_SOURCE = {
    "executed": "",
    "reconciled": " (recovered by reconcile)",
    "approval": " (a person decided)",
    "rejected": " (refused)",
    "cancelled": " (cancelled)",
    "child": " (its child run ended)",
}


@renders(ev.ToolResultRecorded)
def _result(e: ev.ToolResultRecorded) -> Described:
    how = _SOURCE.get(e.source, f" ({e.source})")
    style = "red" if e.is_error else "green"
    return "result", f"{e.name} → {_short(e.content, 60)}{how}", style


_RECONCILED: Final = {
    "done": "it happened: its result is recorded, not run again",
    "not_done": "it did not happen: it runs again",
    "unknown": "it cannot tell: a person decides",
}


@renders(ev.ToolReconciled)
def _reconciled(e: ev.ToolReconciled) -> Described:
    said = _RECONCILED.get(e.verdict, e.verdict.replace("_", " "))
    return "reconciled", f"call {e.tool_call_id}: asked its reconcile function: {said}", "yellow"


@renders(ev.ApprovalDecided)
def _decided(e: ev.ApprovalDecided) -> Described:
    return "decided", f"{e.tool_call_id}: {e.decision}{_by(e.by)} {e.reason}".rstrip(), "yellow"


@renders(ev.ApprovalRequested)
def _approval_requested(e: ev.ApprovalRequested) -> Described:
    if e.reason == "question":
        asked = _short(str((e.payload or {}).get("question", "")))
        return "question?", f"{e.tool_call_id}: {asked} token {e.token}", "bold yellow"
    if e.reason == "child":
        child = (e.payload or {}).get("child_run", "")
        return "child run", f"{e.tool_call_id}: waits on run {child}", "cyan"
    return "approval?", f"{e.tool_call_id} ({e.reason}) token {e.token}", "bold yellow"


_VERDICT_STYLE: Final = {
    "keep": "green",
    "defer": "yellow",
    "dispose": "bold red",
    "redispatch": "bold yellow",
}


_VERDICT_WORDS: Final = {
    "keep": "its executor still has it: left to finish",
    "defer": "its executor was asked to recover it: waiting for that",
    "dispose": "no executor has it: its outcome is unknown",
    "redispatch": "no executor has it: sent again",
}
"""What a takeover did with an effect the dead worker left, in a person's words."""


@renders(ev.EffectReconciled)
def _effect_reconciled(e: ev.EffectReconciled) -> Described:
    what = f"call {e.tool_call_id}" if e.tool_call_id else f"model call of turn {e.turn_index + 1}"
    words = _VERDICT_WORDS.get(e.verdict, e.verdict)
    if e.verdict == "dispose" and not e.tool_call_id:
        words = "no executor has it: the turn asks the model again"
    detail = f"the dead worker's {what}: {words} [{e.verdict}: {e.observed}, {e.effect_id[:12]}]"
    return "recovery", detail, _VERDICT_STYLE[e.verdict]


@renders(ev.RedispatchRecorded)
def _redispatch(e: ev.RedispatchRecorded) -> Described:
    step = e.step.replace("_", " ")
    detail = f"{e.reason}" if e.step == "given_up" else f"attempt {e.attempt}"
    return f"redispatch {step}", f"{detail} [{e.effect_id[:12]}]", "yellow"


@renders(ev.ToolAttemptFailed)
def _attempt_failed(e: ev.ToolAttemptFailed) -> Described:
    again = f"; again in {e.retry_in:.2g}s"
    return "tool retry", f"{e.tool_call_id} attempt {e.attempt}: {_short(e.error)}{again}", "yellow"


@renders(ev.RunDeadlineSet)
def _deadline_set(e: ev.RunDeadlineSet) -> Described:
    when = dt.datetime.fromtimestamp(e.deadline, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    waits = "" if e.counts_waiting else " (time waiting on a person not counted)"
    return "deadline", f"finish by {when}{waits}", "dim"


@renders(ev.ToolsListed)
def _tools_listed(e: ev.ToolsListed) -> Described:
    # Each tool with a short digest of its definition: a changed one reads differently.
    tools = ", ".join(f"{name}@{digest(d)[:6]}" for name, d in e.tools.items())
    return "tools listed", f"{e.source}: {tools or 'none'}", "cyan"


@renders(ev.TraceLinked)
def _trace_linked(e: ev.TraceLinked) -> Described:
    return "trace", e.traceparent, "dim"


@renders(ev.AgentRecorded)
def _agent_recorded(e: ev.AgentRecorded) -> Described:
    label = f" ({e.version})" if e.version else ""
    return "agent version", f"{e.fingerprint}{label}", "dim"


@renders(ev.AgentChanged)
def _agent_changed(e: ev.AgentChanged) -> Described:
    was = f"{e.from_fingerprint} ({e.from_version})" if e.from_version else e.from_fingerprint
    now = f"{e.to_fingerprint} ({e.to_version})" if e.to_version else e.to_fingerprint
    return "agent changed", f"{was} -> {now}", "yellow"


@renders(ev.RunForked)
def _run_forked(e: ev.RunForked) -> Described:
    dropped = f", {e.dropped_calls} in-flight calls not carried" if e.dropped_calls else ""
    return (
        "forked",
        f"from {e.source_run_id} after turn {e.at_turn + 1} ({e.carried_results} results carried"
        f"{dropped})",
        "magenta",
    )


def _asked(event: Event, questions: set[str]) -> Described | None:
    """A question tool's call and the agent's typed answer read as what they are, not as
    tool calls (their effect class is bookkeeping): the question asked, the person's
    answer, the answer the run ends with."""
    if isinstance(event, ev.ToolCallRequested) and event.final:
        return "answer", f"the typed answer: {_short(_args(event.arguments), 100)}", "green"
    if isinstance(event, ev.ToolCallRequested) and event.tool_call_id in questions:
        return "question", f"{event.name}({_short(_args(event.arguments), 80)})", "yellow"
    if isinstance(event, ev.ToolResultRecorded) and event.tool_call_id in questions:
        return "answered", f"{event.name} → {_short(event.content, 60)}", "green"
    return None


def timeline(events: Sequence[StoredEvent], title: str = "") -> Table:
    """One run's events as a table: seq, time since start, what happened."""
    table = Table(title=Text(plain(title)) if title else None, show_edge=False, header_style="bold")
    table.add_column("seq", justify="right", style="dim")
    table.add_column("+ms", justify="right", style="dim")
    table.add_column("event")
    table.add_column("detail", overflow="fold")
    t0 = events[0].created_at if events else 0.0
    asked = {
        e.tool_call_id
        for e in (s.event for s in events)
        if isinstance(e, ev.ApprovalRequested) and e.reason == "question"
    }
    finals = {
        e.tool_call_id
        for e in (s.event for s in events)
        if isinstance(e, ev.ToolCallRequested) and e.final
    }
    for stored in events:
        if isinstance(stored.event, ev.ToolResultRecorded) and stored.event.tool_call_id in finals:
            continue  # the typed answer's bookkeeping: the answer's line and the end say it
        label, detail, style = _asked(stored.event, asked) or describe(stored.event)
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


class Lines(tuple[Text, ...]):
    """Lines printed one by one: a line made ``no_wrap`` (a command to copy) whole, past the
    terminal's width; the others wrapped to it."""

    def __rich_console__(self, console: Console, options: Any) -> Any:
        for i, line in enumerate(self):
            if i:
                yield Text("\n")
            yield line


def summary(view: RunView, hints: Hints | None = None) -> Lines:
    """One line: status, output or error, usage; then each call waiting on a person, with
    the command that decides it (``hints``: what that command repeats of this one)."""
    hints = hints or Hints()
    t = Text()
    t.append(view.status.value, style=STATUS_STYLE.get(view.status.value, ""))
    if view.output:
        t.append(f"  {_short(view.output)}")
    if view.error and view.status is not RunStatus.COMPLETED:  # a resumed run's old failure
        t.append(
            f"  {view.error.get('code')}: {_short(str(view.error.get('message', '')))}", style="red"
        )
    u = view.usage
    turns = "1 turn" if view.turns == 1 else f"{view.turns} turns"
    t.append(f"  [{turns}, {u.input_tokens} in / {u.output_tokens} out tokens]", style="dim")
    if view.parents:
        t.append(plain(f"\n  child of {' < '.join(view.parents)}"), style="dim")
    lines = [t]
    for a in view.approvals:
        if a.reason == "child":
            waiting = f"  waiting on child run {a.payload.get('child_run')} (call {a.tool_call_id})"
            lines.append(Text(plain(waiting), style="cyan", no_wrap=True, overflow="ignore"))
            continue
        for line in _waiting_line(view, a, hints).split("\n"):
            lines.append(Text(plain(f"  {line}"), style="yellow", no_wrap=True, overflow="ignore"))
    return Lines(lines)


def _waiting_line(view: RunView, a: PendingApproval, hints: Hints) -> str:
    """A call waiting on a person, in words, and the command that settles it."""
    rid, call = view.run_id, a.tool_call_id
    if a.reason == "question":
        asked = _short(str(a.payload.get("question", "")))
        command = hints.answer(rid, call, a.payload.get("answer_schema"))
        how = (
            f"answer: `{command}`"
            if command is not None
            else f"answer it: stead answer {short_id(rid)} {call} ANSWER --agents MODULE:ATTR "
            "(the module:attr of your agents)"
        )
        return f"question for a person (call {call}): {asked}\n    {how}"
    if a.reason == "outcome_unknown":
        return (
            f"call {call} ({a.tool}) may or may not have happened: a person says which\n"
            f"    did not happen (run it again): `{hints.decide(rid, call, a.token)}`\n"
            "    or say happened (with --result) or skip instead of not_happened"
        )
    return (
        f"call {call} ({a.tool}) waits for approval\n"
        f"    approve: `{hints.approve(rid, call, a.token)}`\n"
        f"    deny: `{hints.deny(rid, call, a.token)}`"
    )


class _Console(Console):
    """rich's console, but a closed pipe is a ``BrokenPipeError`` for ``stead.cli.main`` to
    end quietly like any other write to stdout (rich would exit 1 by itself)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def print(self, *objects: Any, **options: Any) -> None:
        """A ``Text`` made ``no_wrap`` (a line with a command to copy) is printed whole, past
        the terminal's width, not broken into lines (rich wraps it otherwise); ``Lines``
        line by line, each so."""
        if len(objects) == 1 and isinstance(objects[0], Lines):
            for line in objects[0]:
                self.print(line, **options)
            return
        if any(isinstance(o, Text) and o.no_wrap for o in objects):
            options.setdefault("soft_wrap", True)
        super().print(*objects, **options)


def console() -> Console:
    """The console everything prints to: the terminal's width, or ``$COLUMNS``; 120 when
    piped without ``$COLUMNS`` (wide enough for a timeline in a file)."""
    import os

    probe = Console()
    sized = probe.is_terminal or os.environ.get("COLUMNS", "").isdigit()
    return _Console(highlight=False, width=None if sized else 120)
