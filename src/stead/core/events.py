"""The events of a run's log: typed, frozen, versioned, named in the past tense.

Each event is a tagged record (``stead.core.tagged``: a frozen dataclass named by its
``kind``) in the ``Event`` union; the events of a turn, of a call, of an owner taking the run
share those fields from one base (base fields first: the order of a row's keys). Their rows in
the store (``encode``, ``decode``, the writer's check ``problem``, versions and upcasters)
are ``stead.core.event_codec``'s, which follows from the fields here: adding an event needs
nothing there. Text from outside (a model's reply, a tool's result, an error message) is made
storable where it enters: see ``stead.core.messages.repair_text``.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from stead.core.canonical import JSON
from stead.core.messages import (
    AssistantMessage,
    Attachment,
    Message,
    Usage,
    repair_note,
    repair_text,
    unstorable,
)
from stead.core.tagged import TaggedRecord, tagged

EffectClass = Literal["read_only", "idempotent_write", "non_idempotent"]
EFFECT_CLASSES: Final = ("read_only", "idempotent_write", "non_idempotent")

ResultSource = Literal[
    "executed", "reconciled", "rejected", "approval", "cancelled", "limit", "loop", "child"
]
"""Where a tool result came from: the handler ran, the reconcile function found it, the call
was refused before running, a person decided, the run was cancelled or bounded, or the child
run the call started ended (``stead.core.children``)."""

Decision = Literal["approve", "deny", "happened", "not_happened", "skip", "answer"]


def _repair_field(event: Any, name: str, where: str) -> None:
    """Make one text field of an event being constructed storable, noting the repair."""
    value = getattr(event, name)
    if isinstance(value, str) and unstorable(value):
        fixed, n = repair_text(value)
        object.__setattr__(event, name, f"{fixed}\n\n{repair_note((n, where))}")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Turn(TaggedRecord):
    """An event of one turn: ``turn_index`` counts from 0."""

    turn_index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call(_Turn):
    """An event of one tool call of a turn: ``tool_call_id`` is the model's call id."""

    tool_call_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Owner(TaggedRecord):
    """An owner took the run: the worker (``owner``) and its fencing ``epoch``."""

    owner: str
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Why(TaggedRecord):
    """An event whose ``reason`` says why, for the timeline."""

    reason: str = ""


@tagged("run_created")
class RunCreated(TaggedRecord):
    """A run exists, with everything needed to start it on any machine."""

    run_id: str
    agent: str
    """Name of the agent definition that drives it (looked up by name on resume)."""
    input: str
    """The user input that starts the conversation."""
    session_id: str = ""
    """Groups runs of one conversation or user session."""
    correlation_id: str = ""
    """The caller's id for tracing this run through their systems."""
    config: dict[str, Any] | None = None
    """Per-run settings (limits, model overrides), JSON."""
    history: tuple[Message, ...] = ()
    """Messages before ``input`` (a conversation's earlier turns): the model reads them first."""
    history_from: str = ""
    """A run whose whole history comes before ``history`` (which then holds only what that
    run added): a conversation keeps each message once. Resolved by the runtime before a fold."""
    attachments: tuple[Attachment, ...] = ()
    """Images and documents sent with ``input``, by digest (their bytes are stored once)."""


@tagged("run_started")
class RunStarted(_Owner):
    """A worker began driving a queued run."""


@tagged("run_recovered")
class RunRecovered(_Owner):
    """A new owner took over a run whose previous owner died or lost its lease."""

    previous_owner: str = ""
    """Who held it before, if known."""


@tagged("turn_started")
class TurnStarted(_Turn):
    """A model call for turn ``turn_index`` is about to be made."""


@tagged("turn_resumed")
class TurnResumed(_Turn):
    """An interrupted turn with unfinished tool calls is being continued after a requeue."""


@tagged("notice_injected")
class NoticeInjected(_Turn):
    """The runtime added a system notice to the conversation (e.g. "this is your last turn"),
    carried by the request of turn ``turn_index``."""

    content: str
    """What the model reads."""
    reason: str = ""
    """Why: final_turn, ..."""


@tagged("model_call_failed")
class ModelCallFailed(_Turn):
    """One attempt of a model call failed; retried or not according to ``code``."""

    attempt: int
    """1 for the first attempt."""
    code: str
    """Stable failure code (stead.core.failures)."""
    message: str = ""
    """Human-readable detail."""
    usage: Usage | None = None
    """Tokens the failed attempt consumed (counted in the run's usage), if known."""

    def __post_init__(self) -> None:
        _repair_field(self, "message", "in this message")  # a provider's error text


@tagged("assistant_message")
class AssistantMessageRecorded(_Turn):
    """The model's final reply for a turn. Its tool calls are the write-ahead intent."""

    message: AssistantMessage
    """Text and tool calls."""
    usage: Usage
    """Tokens this call consumed."""
    model: str = ""
    """Which model answered."""
    settings: dict[str, Any] | None = None
    """The ``ModelSettings`` the call was sent with (``to_json``), when any were set."""


@tagged("tool_call_requested")
class ToolCallRequested(_Call):
    """Intent: this call will run (or is refused, when ``rejection`` is set). Written first."""

    name: str
    """Tool name as the model gave it."""
    arguments: str
    """Canonical JSON of the arguments, or the raw text when it did not parse."""
    effect_class: EffectClass | None
    """The tool's side-effect class; None for an unknown tool."""
    idempotency_key: str
    """sha256(run_id + tool_call_id), hex; the call id is unique in the run (see
    ``stead.core.builders.unique_call_ids``), so the key is too."""
    rejection: str | None = None
    """Why the call may not run (unknown tool, bad JSON, schema failure); None when valid."""
    requires_approval: bool = False
    """The tool's policy wants a person's consent before this call runs."""
    final: bool = False
    """The agent's accepted final result (``output_type``): answered in this commit, never
    awaited, so, like a refused call, it leaves the run where it is."""


@tagged("loop_detected")
class LoopDetected(_Call):
    """The model repeated the same call (tool and canonical arguments) too many times in a row;
    this call is not run and gets an error result asking for another strategy."""

    name: str
    repeats: int
    """How many identical calls in a row, this one included."""


@tagged("tool_call_started")
class ToolCallStarted(_Call):
    """A handler is about to run (recorded for non_idempotent tools, where it matters)."""

    attempt: int
    """1 for the first attempt."""
    effect_id: str
    """Deterministic id of this attempt."""


@tagged("tool_result_recorded")
class ToolResultRecorded(_Call):
    """The one result of a tool call. Unique per (run, turn_index, tool_call_id)."""

    name: str
    """Tool name."""
    content: str
    """What the model reads."""
    is_error: bool = False
    """True for failures, refusals and cancellations."""
    source: ResultSource = "executed"
    """How the result was obtained."""
    attempt: int = 1
    """Which attempt produced it."""

    def __post_init__(self) -> None:
        # A tool's output (os.listdir() of a folder whose name is not UTF-8, a handler's
        # error message) is text from outside: made storable here, with a note, so the one
        # result is recorded and the handler is not run again on every attempt.
        if type(self.content) is not str or not self.content.isascii():  # ASCII: O(1)
            _repair_field(self, "content", "in this result")


@tagged("tool_attempt_failed")
class ToolAttemptFailed(_Call):
    """One attempt of a call failed or timed out, and the tool's ``retries`` allow another:
    it runs again after ``retry_in`` seconds (a last failure is the call's result instead)."""

    attempt: int
    """The attempt that failed."""
    error: str
    """What went wrong."""
    retry_in: float = 0.0
    """Backoff before the next attempt, in seconds."""

    def __post_init__(self) -> None:
        _repair_field(self, "error", "in this error")  # a tool's exception text


@tagged("tool_outcome_unknown")
class ToolOutcomeUnknown(_Call):
    """A call was in flight when its worker died and nothing can tell whether it happened."""

    reason: str
    """Why it is unknown."""

    def __post_init__(self) -> None:
        _repair_field(self, "reason", "in this reason")  # may quote a reconcile function


@tagged("tool_call_deferred")
class ToolCallDeferred(_Call):
    """An attempt of the call stopped without acting and left the call to a person: the tool
    itself asked, while running, for consent (``ask="approval"``: an approval runs it again,
    approved; a denial is its result) or for the call to be made elsewhere (``ask="result"``:
    a person's answer is its result). The ``approval_requested`` that asks follows in the
    same commit; the call is not in flight (it did not act), so a crash never makes it an
    unknown outcome."""

    attempt: int
    """The attempt that asked."""
    ask: Literal["approval", "result"]
    reason: str = ""
    """What the tool said, if anything."""

    def __post_init__(self) -> None:
        _repair_field(self, "reason", "in this reason")  # a tool's text


@tagged("tool_reconciled")
class ToolReconciled(_Call):
    """A reconcile (status-check) function answered for an in-flight call."""

    verdict: Literal["done", "not_done", "unknown"]
    """done: result follows; not_done: it will run; unknown: a person decides."""


@tagged("approval_requested")
class ApprovalRequested(_Call):
    """The run pauses until a person decides about this call."""

    reason: Literal["outcome_unknown", "policy", "question", "child"]
    """Unknown outcome after a crash, the tool's approval policy, a question tool's
    question (the answer is the call's result), or a child run the call started
    (``stead.core.children``: its end is the call's result; no person decides it)."""
    payload: dict[str, Any] | None = None
    """What the person is shown (tool, arguments, context; ``asked_at``, when it was asked,
    lets a run deadline that does not count waiting leave the wait out)."""
    token: str = ""
    """Single-use resume token a decision must quote."""
    deadline: float | None = None
    """When the run times out if nobody decides (seconds since the epoch), if ever."""


@tagged("approval_decided")
class ApprovalDecided(_Call):
    """A person decided about a pending call."""

    decision: Decision
    """approve/not_happened: run it; deny/skip: error result; happened/answer: result given."""
    by: str = ""
    reason: str = ""
    """Why (a denial's reason is shown to the model)."""
    arguments: str | None = None
    """Edited arguments (canonical JSON) to run instead, for approve."""


@tagged("run_completed")
class RunCompleted(TaggedRecord):
    """The run reached its goal or a stop condition."""

    output: str
    """Final answer."""
    stop_reason: str = "end_turn"
    """Why it stopped."""
    usage: Usage = Usage()  # Usage is frozen: sharing one default is safe
    """Aggregated usage of the whole run."""
    data: JSON = None
    """The validated structured output (the agent's ``output_type``) as JSON; None for text."""


@tagged("run_failed")
class RunFailed(TaggedRecord):
    """The run hit an unrecoverable error."""

    code: str
    """Stable failure code."""
    phase: Literal["model", "runtime"]
    """``stead.core.failures.FailurePhase``: the model call, or a step that kept failing."""
    message: str = ""
    """Detail for a person."""
    last_seq: int = 0
    """The last checkpoint (event sequence) before the failure."""
    details: dict[str, Any] | None = None
    """Structured figures (e.g. a budget breach: spent, next-turn estimate, budget)."""

    def __post_init__(self) -> None:
        _repair_field(self, "message", "in this message")  # may quote a provider or a tool


@tagged("step_failed")
class StepFailed(TaggedRecord):
    """A step of the run loop raised something that is not about the lease, the store or a
    cancel (a bug, or input the run cannot take). Counted by the fold: the
    ``Limits.max_step_failures``-th failure of the same step in a row ends the run ``failed``
    (code ``step_failed``), so no claimant retries it forever. Kept small and plain text, so
    that it can be stored even when the step's own events could not."""

    step: str
    """Which step, e.g. ``call_model (turn 2)``."""
    error_type: str
    """The exception's class name."""
    message: str = ""
    """The exception's text (truncated)."""


@tagged("run_cancel_requested")
class RunCancelRequested(_Why):
    """Someone asked to cancel the run; its owner aborts in-flight work and then cancels it."""

    by: str = ""


@tagged("run_cancelled")
class RunCancelled(_Why):
    """The run was aborted by a caller or signal."""


@tagged("run_timed_out")
class RunTimedOut(_Why):
    """A deadline passed: an approval's, or the run's own (``Limits.max_duration``); its
    ``reason`` says which."""


@tagged("run_deadline_set")
class RunDeadlineSet(TaggedRecord):
    """The run must finish by ``deadline`` or time out: set at its start from
    ``Limits.max_duration``, and moved later by a wait on a person that does not count."""

    deadline: float
    """Seconds since the epoch, by the clock of the process that set it."""
    counts_waiting: bool = True
    """Whether time waiting on a person counts against it."""


@tagged("run_requeued")
class RunRequeued(_Why):
    """An explicit resume sent a finished run back to the queue (``reason``: who, and why)."""


Observed = Literal["active", "orphaned", "terminal", "missing", "aborted"]
"""What an executor holds for an effect's key (``stead.core.reconcile``)."""


@tagged("effect_reconciled")
class EffectReconciled(_Turn):
    """At a takeover, the reconciler's verdict on an effect with intent and no outcome. A
    ``dispose`` is the disposal itself: the model call's attempt is spent (the turn goes on
    under a new key), a tool call's settles effect_unknown and its effect class decides."""

    tool_call_id: str = ""
    """Its call; "" for the turn's model call."""
    attempt: int
    """The attempt its key names."""
    effect_id: str
    """Its assignment key."""
    observed: Observed
    """What the executor held."""
    verdict: Literal["keep", "defer", "dispose", "redispatch"]
    """Wait for it, wait and ask the pool to recover it, give it up, or hand it over again."""
    reason: str = ""
    """Why, for the timeline."""
    epoch: int
    """The deciding owner's epoch: a superseded owner's verdict is refused."""


@tagged("redispatch")
class RedispatchRecorded(TaggedRecord):
    """One record of a key's redispatches: ``planned`` (before the dispatch), then
    ``dispatched`` (accepted), or ``given_up``. Folded by ``stead.core.reconcile``."""

    effect_id: str
    """The key handed over again."""
    step: Literal["planned", "dispatched", "given_up"]
    """Which record."""
    attempt: int = 0
    """The redispatch it counts (from 1); 0 for ``given_up``."""
    reason: str = ""
    """Why it was given up."""
    epoch: int
    """The deciding owner's epoch."""


@tagged("tools_listed")
class ToolsListed(TaggedRecord):
    """A tool source (an MCP server) listed its tools at a drive's start, and they differ from
    the last listing of this run's log: the timeline shows a changed definition."""

    source: str
    """The source's name."""
    tools: dict[str, Any]
    """Tool name -> its definition as listed (schema, annotations) and the effect class used."""


@tagged("trace_linked")
class TraceLinked(TaggedRecord):
    """The run's trace context (W3C ``traceparent``), so that a drive in another process, after
    a crash, continues the same trace."""

    traceparent: str
    """``00-<trace id>-<span id>-<flags>`` of the span that recorded it."""


@tagged("run_forked")
class RunForked(TaggedRecord):
    """This run was made from another run's history up to the end of one of its turns (its
    ``run_created`` holds that history; nothing of it runs again here)."""

    source_run_id: str
    """The run it was forked from."""
    at_turn: int
    """The source's last turn it carries (its turns 0..at_turn)."""
    carried_results: int = 0
    """Tool results carried over from the source (replayed as history, never re-run)."""
    dropped_calls: int = 0
    """Calls of that turn still in flight in the source when it was forked: not carried
    (their outcome is the source's); the fork's history reads an error result for each."""


@tagged("agent_recorded")
class AgentRecorded(TaggedRecord):
    """The version of the agent driving this run, recorded when it is first driven."""

    fingerprint: str
    """``stead.core.versions.fingerprint`` of the agent's tools, instructions, model, output
    type and version label."""
    version: str = ""
    """The agent's ``version=`` label, if it has one."""


@tagged("agent_changed")
class AgentChanged(TaggedRecord):
    """A different version of the agent than the one recorded took the run over (under the
    ``continue`` policy; ``pin`` leaves the run to its version, ``fail`` fails it)."""

    from_fingerprint: str
    to_fingerprint: str
    from_version: str = ""
    to_version: str = ""


Event: TypeAlias = (
    RunCreated
    | RunStarted
    | RunRecovered
    | TurnStarted
    | TurnResumed
    | NoticeInjected
    | ModelCallFailed
    | AssistantMessageRecorded
    | ToolCallRequested
    | LoopDetected
    | ToolCallStarted
    | ToolResultRecorded
    | ToolAttemptFailed
    | ToolOutcomeUnknown
    | ToolCallDeferred
    | ToolReconciled
    | ApprovalRequested
    | ApprovalDecided
    | RunCompleted
    | RunFailed
    | StepFailed
    | RunCancelRequested
    | RunCancelled
    | RunTimedOut
    | RunDeadlineSet
    | RunRequeued
    | EffectReconciled
    | RedispatchRecorded
    | ToolsListed
    | TraceLinked
    | RunForked
    | AgentRecorded
    | AgentChanged
)

EVENT_TYPES: Final[dict[str, type[Any]]] = {t.kind: t for t in typing.get_args(Event)}
