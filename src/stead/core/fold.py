"""Fold a run's events into its current state.

``fold(events)`` is the only way state is made: the runtime, the CLI and the tests all
derive what a run is from its log, so they cannot disagree. ``apply`` validates every event
against the state machine and the run's structure (a result for a call nobody requested, a
second result, a turn that starts with calls still open) and raises without changing the
state, which is how a bad append is refused before it is written.

``RunState`` is a mutable accumulator for speed (folding 10,000 events must not copy the
conversation 10,000 times); treat a state you did not fold yourself as read-only and use
``copy()`` before applying to it.
"""

from __future__ import annotations

import copy as _copy
import functools
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, TypeVar

from stead.core.canonical import JSON, sha256_hex
from stead.core.codec import Record, Versions, keyed
from stead.core.codegen import fast_init
from stead.core.event_codec import RECORDS
from stead.core.events import (
    ApprovalRequested,
    Decision,
    EffectClass,
    EffectReconciled,
    Event,
    RedispatchRecorded,
    RunRecovered,
    StepFailed,
    ToolResultRecorded,
)
from stead.core.messages import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    Usage,
)
from stead.core.output import JSON_VALUE
from stead.core.states import BIRTH, TABLE, RunStatus
from stead.errors import IllegalTransition

STATE_VERSION: Final = 6
"""Bumped whenever RunState's snapshot shape changes, with an upcaster from the previous
version in ``SNAPSHOT`` (a snapshot no upcaster reaches is ignored and the log folded)."""


@dataclass(slots=True, kw_only=True)
class CallState:
    """Everything known about one tool call of the current turn."""

    turn_index: int
    tool_call_id: str
    """The model's id."""
    name: str
    """Tool name."""
    arguments: str
    """Canonical JSON of the arguments (or raw text when rejected)."""
    effect_class: EffectClass | None
    """Side-effect class; None for unknown tools."""
    idempotency_key: str
    """sha256(run_id + tool_call_id); call ids are unique in a run, so keys are too."""
    rejection: str | None = None
    """Why it may not run, if so."""
    requires_approval: bool = False
    """A person must consent before it runs."""
    attempts: int = 0
    """How many times a handler was recorded as started."""
    result: ToolResultRecorded | None = None
    """Its one result, once recorded."""
    unknown: bool = False
    """Its outcome was declared unknown after a crash."""
    reconciled: str | None = None
    """What the tool's reconciler found since the last start: done, not_done or unknown (the
    ``tool_reconciled`` event's verdict); None when it has not been asked."""
    decision: Decision | None = None
    """Latest human decision since the last start."""
    edited_arguments: str | None = None
    """Arguments a person approved instead of the model's."""
    deferred: bool = False
    """Its last attempt stopped without acting and asked a person (``tool_call_deferred``)."""

    @property
    def pending(self) -> bool:
        """No result yet."""
        return self.result is None

    @property
    def in_flight(self) -> bool:
        """Started at least once and never settled: it may or may not have happened."""
        return self.result is None and self.attempts > 0 and not self.deferred

    def effective_arguments(self) -> str:
        """The arguments a run of this call uses: edited by a person, or the model's."""
        return self.edited_arguments if self.edited_arguments is not None else self.arguments


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TurnUsage:
    """What one turn's model calls consumed (failed attempts included) and which model
    answered it, so a view can price each turn by its own model."""

    turn_index: int
    """The turn (-1: turns folded by a stead that did not count per turn, summed)."""
    model: str = ""
    """The model its reply names ("" before a reply, or when unknown)."""
    usage: Usage = Usage()  # noqa: RUF009 - Usage is frozen, sharing one default is safe
    """Tokens of every attempt of the turn."""


_TURN_USAGE: Final = Record(TurnUsage, label="turn usage")


def count_turn(state: RunState, turn_index: int, usage: Usage, model: str = "") -> None:
    """Add ``usage`` to the run's and to turn ``turn_index``'s (the handlers' one way)."""
    state.usage = state.usage + usage
    per = state.turn_usage
    if per and per[-1].turn_index == turn_index:
        last = per[-1]
        per[-1] = TurnUsage(
            turn_index=turn_index, model=model or last.model, usage=last.usage + usage
        )
    else:
        per.append(TurnUsage(turn_index=turn_index, model=model, usage=usage))


@dataclass(slots=True, kw_only=True)
class _Conversation:
    """``RunState.conversation`` as placed so far: a cache, never compared or saved."""

    source: list[Message]
    """The message list it was built from (a cache of another list is stale)."""
    consumed: int = 0
    """How many of its messages are placed."""
    out: list[Message] = field(default_factory=list)
    """The conversation so far."""
    reply: AssistantMessage | None = None
    """The last reply with tool calls, whose order its results take (the order is built
    only for a block of two or more results: most turns have one)."""
    start: int = 0
    """Where the last block of results begins in ``out``."""


@dataclass(slots=True, kw_only=True)
class RunState:
    """The folded state of one run."""

    run_id: str = ""
    agent: str = ""
    input: str = ""
    """First user input."""
    session_id: str = ""
    """Session grouping."""
    correlation_id: str = ""
    """Caller's correlation id."""
    config: dict[str, Any] = field(default_factory=dict)
    """Per-run settings."""
    status: RunStatus | None = None
    """None until run_created is applied."""
    seq: int = 0
    """Sequence number of the last applied event."""
    messages: list[Message] = field(default_factory=list)
    """The conversation in the order events recorded it."""
    turn_index: int = -1
    """Current turn (-1 before the first)."""
    turn_has_reply: bool = False
    """The current turn's assistant message is recorded."""
    calls: dict[str, CallState] = field(default_factory=dict)
    """Tool calls of the current turn, in the model's order."""
    model_failures: int = 0
    """Failed model attempts in the current turn."""
    approvals: dict[str, ApprovalRequested] = field(default_factory=dict)
    """Pending approvals by tool call id."""
    usage: Usage = field(default_factory=Usage)
    """Aggregated usage of the whole run."""
    turn_usage: list[TurnUsage] = field(default_factory=list)
    """Usage per turn, in turn order (``count_turn``); sums to ``usage``."""
    tool_calls_total: int = 0
    """Tool calls requested over the whole run."""
    output: str | None = None
    """Final answer once completed."""
    stop_reason: str | None = None
    """Why it completed."""
    data: JSON = None
    """The validated structured output once completed (``RunCompleted.data``)."""
    error: dict[str, Any] | None = None
    """code/phase/message of the last failure, cancellation or timeout."""
    owner: str = ""
    """Last recorded owner."""
    epoch: int = 0
    """Last recorded owner's epoch."""
    cancel_requested: str | None = None
    """The reason of a pending cancel request, until the run is cancelled."""
    recent_calls: list[str] = field(default_factory=list)
    """Digests of the latest tool calls (name + canonical arguments), newest last, for
    repetition detection."""
    call_ids: set[str] = field(default_factory=set)
    """Every tool call id of every recorded reply: a new reply's ids are made unique against
    these (``stead.core.builders.unique_call_ids``). Not in a snapshot: rebuilt from its
    messages."""
    step_failures: int = 0
    """How many times in a row a step failed (``step_failed``) with no progress between
    (so the same step); any other event but ``run_recovered`` (a new claimant) resets it."""
    last_step_failure: StepFailed | None = None
    """The latest of those failures: its step and error."""
    deadline: float | None = None
    """When the run times out (``Limits.max_duration``; ``run_deadline_set``), in seconds
    since the epoch by the clock of the process that set it; None for no deadline."""
    deadline_counts_waiting: bool = True
    """Whether time waiting on a person counts against ``deadline`` (when not, the decision
    that ends a wait moves the deadline later by the wait)."""
    agent_fingerprint: str = ""
    """The version of the agent recorded driving the run (``stead.core.versions``)."""
    agent_version: str = ""
    """That version's label, if its agent has one."""
    _conversation: _Conversation | None = field(default=None, init=False, repr=False, compare=False)
    """Cache of ``conversation()``."""

    def copy(self) -> RunState:
        """A deep copy safe to apply events to."""
        return _copy.deepcopy(self)

    def pending_calls(self) -> list[CallState]:
        """Calls of the current turn that have no result, in the model's order."""
        return [c for c in self.calls.values() if c.result is None]

    def unrequested_calls(self) -> list[str]:
        """Ids of the current reply's tool calls with no ``tool_call_requested`` yet.

        They are open too: a history may not move past a call that has no result."""
        reply = self.last_assistant()
        if reply is None:
            return []
        return [c.id for c in reply.tool_calls if c.id not in self.calls]

    def last_assistant(self) -> AssistantMessage | None:
        """The current turn's assistant message, if recorded."""
        if not self.turn_has_reply:
            return None
        for m in reversed(self.messages):
            if isinstance(m, AssistantMessage):
                return m
        return None  # pragma: no cover - turn_has_reply implies one exists

    def conversation(self) -> list[Message]:
        """Messages as a model must see them: each turn's results in the order of its calls.

        Results are recorded in the order tools finish, which varies; the request sent to a
        model must not, so its digest is stable across a crash and a resume.
        """
        # Messages are only ever appended, so the work done for the last request is kept
        # and only the new messages are placed (a run asks once per turn: this keeps a long
        # run linear instead of quadratic). Anything else (a new list) starts over.
        c = self._conversation
        if c is None or c.source is not self.messages or c.consumed > len(self.messages):
            c = self._conversation = _Conversation(source=self.messages)
        out, reply, start = c.out, c.reply, c.start
        for m in self.messages[c.consumed :]:
            if isinstance(m, ToolResultMessage):
                out.append(m)
                continue
            if len(out) - start > 1:  # only a block of two or more can be out of order
                _place(out, start, reply)
            if isinstance(m, AssistantMessage):
                reply = m if m.tool_calls else None
            out.append(m)
            start = len(out)
        c.consumed, c.reply, c.start = len(self.messages), reply, start
        if len(out) - start > 1:
            _place(out, start, reply)
        return list(out)

    # -- snapshots -------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The whole state as JSON, for a snapshot row: ``v`` (its version), then every field
        by the one codec (``SNAPSHOT``)."""
        return {"v": STATE_VERSION, **typing.cast(dict[str, Any], _STATE.enc(self))}  # type: ignore[misc]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        """Rebuild a snapshot, upgrading an older version first; ``ValueError`` for a newer
        or unknown version or a malformed field (the caller then folds the log instead)."""
        if not isinstance(data, dict):
            raise ValueError("a snapshot is a JSON object")
        body = SNAPSHOT.upcast(data.get("v"), {k: v for k, v in data.items() if k != "v"})
        state: RunState = _STATE.dec(body)
        state.call_ids = {
            c.id for m in state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
        }
        return state


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """v3 counts failed steps: a v2 state was written before ``step_failed`` existed, so
    none had failed. (``call_ids`` arrived too, but it is rebuilt from the messages.)"""
    return {**data, "step_failures": 0, "last_step_failure": None}


def _v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """v4 keeps a completed run's structured output (v3 had none); names a call's reconcile
    answer ``reconciled`` (it was ``verdict``, a word that also meant a tool's admission and
    a person's decision); and counts usage per turn: a v3 state knows only the sum, kept as
    one entry of turn -1 with no model (so its price is unknown rather than wrong); and has a
    run deadline (a v3 state was written before ``run_deadline_set`` existed)."""
    usage = data.get("usage") or {}
    out = {
        **data,
        "data": None,
        "deadline": None,
        "deadline_counts_waiting": True,
        "turn_usage": [{"turn_index": -1, "usage": usage}] if usage else [],
    }
    calls = data.get("calls")
    if isinstance(calls, list):  # malformed calls: the decoder says so
        out["calls"] = [
            {("reconciled" if k == "verdict" else k): v for k, v in c.items()}
            if isinstance(c, dict)
            else c
            for c in calls
        ]
    return out


def _v4_to_v5(data: dict[str, Any]) -> dict[str, Any]:
    """v5 knows the agent version that drives the run; a v4 state was written before any
    was recorded."""
    return {**data, "agent_fingerprint": "", "agent_version": ""}


def _v5_to_v6(data: dict[str, Any]) -> dict[str, Any]:
    """v6 knows a call whose tool stopped without acting to ask a person
    (``tool_call_deferred``); a v5 state was written before any could."""
    calls = data.get("calls")
    if not isinstance(calls, list):  # malformed calls: the decoder says so
        return data
    return {
        **data,
        "calls": [{**c, "deferred": False} if isinstance(c, dict) else c for c in calls],
    }


SNAPSHOT: Final = Versions(
    "snapshot", STATE_VERSION, {2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _v5_to_v6}
)
"""The snapshot's versions and upcasters (the same mechanism as an event kind's). A version
with no path to today (v1) is refused, and the log is folded from the start instead."""

_CALL: Final = Record(CallState, omit_defaults=False)
_STATE: Final = Record(
    RunState,
    omit_defaults=False,
    exclude=("call_ids",),  # rebuilt from the messages
    nodes={
        "calls": keyed(_CALL, "tool_call_id"),
        "approvals": keyed(RECORDS["approval_requested"], "tool_call_id"),
        "data": JSON_VALUE,
    },
)
"""The whole state, every field written (a snapshot is one row per run, not one per event):
calls and approvals as lists, events (a call's result, an approval, the last step failure)
as their rows' data."""


# -- applying events ---------------------------------------------------------------------
#
# One handler per event kind, found by kind (as Temporal's ``_apply_<job>``), written in
# ``stead.core.handlers`` and registered here by ``handles``. A handler runs every check of
# its event before it changes anything (a refusal leaves no trace) and returns the status
# the event moves the run to, or None. ``apply`` is the one choke point that looks the move
# up in ``stead.core.states.TABLE``. A moving event's handler only checks; what it records
# is its ``after`` half, which runs once the move is allowed.

RECENT_CALLS: Final = 32
"""How many call digests the state keeps for repetition detection."""

E = TypeVar("E", bound=Event)
Handler: TypeAlias = Callable[[RunState, Any], RunStatus | None]
After: TypeAlias = Callable[[RunState, Any], None]
HANDLERS: Final[dict[str, tuple[Handler, After | None]]] = {}
"""event kind -> (handler, after): how each event is applied. Every kind has one
(``tests/core/test_states.py`` says so). ``stead.core.handlers`` fills it: it imports this
module, never the other way round, and the ``stead.core`` package imports it, so the table is
complete before any code of ``stead.core`` can run."""


def handles(cls: type[E]) -> Callable[[Callable[[RunState, E], Any]], Callable[[RunState, E], Any]]:
    """Register the handler of ``cls`` events."""

    def register(fn: Callable[[RunState, E], Any]) -> Callable[[RunState, E], Any]:
        HANDLERS[cls.kind] = (fn, HANDLERS.get(cls.kind, (fn, None))[1])
        return fn

    return register


def after(cls: type[E]) -> Callable[[Callable[[RunState, E], None]], Callable[[RunState, E], None]]:
    """Register what ``cls`` records once its handler allowed it and its move is made."""

    def register(fn: Callable[[RunState, E], None]) -> Callable[[RunState, E], None]:
        HANDLERS[cls.kind] = (HANDLERS[cls.kind][0], fn)
        return fn

    return register


@functools.lru_cache(maxsize=64)
def call_digest(name: str, arguments: str) -> str:
    """Identity of a call for repetition detection: tool name and canonical arguments.

    Remembered for the last few calls (a pure function of its arguments, so never stale):
    the intent's builder digests each call to count repeats, and folding the request it
    built digests the same call again right after."""
    return sha256_hex(name + "\x00" + arguments)[:16]


def _place(out: list[Message], start: int, reply: AssistantMessage | None) -> None:
    """Sort the results from ``start`` on into the order of ``reply``'s calls."""
    order = {c.id: i for i, c in enumerate(reply.tool_calls)} if reply is not None else {}
    out[start:] = sorted(out[start:], key=lambda r: _rank(order, r))


def _rank(order: dict[str, int], message: Message) -> int:
    """Position of a result's call in its reply (unknown ids last, in arrival order)."""
    assert isinstance(message, ToolResultMessage)
    return order.get(message.tool_call_id, len(order))


_KEEPS_STEP_FAILURES: Final = frozenset(
    {StepFailed.kind, RunRecovered.kind, EffectReconciled.kind, RedispatchRecorded.kind}
)
"""A failed step, a new claimant and its recovery of what the last one left in flight are not
progress; anything else resets the count."""


_MOVES: Final = {status: dict(row) for status, row in TABLE.items()}
"""``TABLE`` as plain dicts, for ``apply``: a read-only mapping's ``get`` is a call more, on
every moving event."""


def apply(state: RunState, event: Event, seq: int | None = None) -> None:
    """Apply one event in place, or raise (leaving ``state`` unchanged) if it is not legal.

    Its handler checks it first; a move it makes is looked up in ``TABLE`` here, the one
    place a status changes; then what it records is recorded.
    """
    kind = event.kind
    status = state.status
    if status is None and kind != BIRTH[0]:
        current = "nothing"
        raise IllegalTransition(
            current, current, kind, "the first event of a run must be run_created"
        )
    handler, after_move = HANDLERS[kind]
    target = handler(state, event)
    if target is not None:
        if (_MOVES[status].get(kind) if status is not None else BIRTH[1]) is not target:
            assert status is not None
            why = f"the run is already {target}" if status is target else ""
            raise IllegalTransition(status.value, target.value, kind, why)
        state.status = target
    if after_move is not None:
        after_move(state, event)
    if state.step_failures and kind not in _KEEPS_STEP_FAILURES:
        # Anything else recorded is progress (a new claimant is not): the count restarts.
        state.step_failures = 0
        state.last_step_failure = None
    state.seq = seq if seq is not None else state.seq + 1


def fold(events: Iterable[Event], start: RunState | None = None) -> RunState:
    """Fold ``events`` on top of ``start`` (a snapshot) or from nothing.

    Sequence numbers are counted from the start state's ``seq``.
    """
    state = start.copy() if start is not None else RunState()
    for e in events:
        apply(state, e)
    return state
