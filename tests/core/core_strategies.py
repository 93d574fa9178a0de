"""Hypothesis strategies and log builders shared by the core tests.

Two kinds of data:

* ``events()`` / ``events_of(cls)``: arbitrary, individually well-typed events, derived from
  the dataclasses' type hints so a new field is covered without touching this file.
* ``run_logs()``: whole *valid* run logs, produced by a small simulation of a runtime (turns,
  replies with 0-3 tool calls, recovery scripts per side-effect class, approvals, failures,
  cancellations, timeouts and requeues). It is written independently of ``stead.core.decide``
  so the fold is not checked against itself. A log is a list of batches; each batch is what a
  runtime appends in one transaction (a reply and its intents, a decision and its result...).
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal, get_args, get_origin, get_type_hints

from hypothesis import strategies as st

from stead.core.canonical import effect_id, idempotency_key
from stead.core.events import (
    EVENT_TYPES,
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
from stead.core.messages import (
    AssistantMessage,
    Attachment,
    Message,
    NoticeMessage,
    RedactedThinking,
    Thinking,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

# -- plain JSON ------------------------------------------------------------------------------

SAFE_INT = 2**53 - 1

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-SAFE_INT, SAFE_INT),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)

# -- messages and events ---------------------------------------------------------------------

usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    cache_creation_input_tokens=st.integers(0, 10**6),
    cache_read_input_tokens=st.integers(0, 10**6),
)
tool_calls = st.builds(
    ToolCall, id=st.text(max_size=8), name=st.text(max_size=8), arguments=st.text(max_size=16)
)
thinking_blocks = st.one_of(
    st.builds(Thinking, text=st.text(max_size=16), signature=st.text(max_size=16)),
    st.builds(RedactedThinking, data=st.text(max_size=16)),
)
assistant_messages = st.builds(
    AssistantMessage,
    text=st.text(max_size=20),
    tool_calls=st.lists(tool_calls, max_size=3).map(tuple),
    stop_reason=st.sampled_from(["end_turn", "tool_use", "max_tokens"]) | st.text(max_size=8),
    thinking=st.lists(thinking_blocks, max_size=2).map(tuple),
)


attachments = st.builds(
    Attachment,
    kind=st.sampled_from(["image", "document"]),
    media_type=st.sampled_from(["image/png", "application/pdf"]),
    digest=st.text(max_size=12),
    name=st.text(max_size=6),
)
user_messages = st.builds(
    UserMessage,
    content=st.text(max_size=20),
    attachments=st.lists(attachments, max_size=2).map(tuple),
)
messages = st.one_of(
    user_messages,
    assistant_messages,
    st.builds(
        ToolResultMessage,
        tool_call_id=st.text(max_size=8),
        name=st.text(max_size=8),
        content=st.text(max_size=12),
        is_error=st.booleans(),
    ),
    st.builds(NoticeMessage, content=st.text(max_size=12)),
)


def strategy_for_hint(hint: Any) -> st.SearchStrategy[Any]:
    """A strategy for one event field's type hint; raises for a hint it does not know."""
    if hint is str:
        return st.text(max_size=20)
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.integers(-(2**40), 2**40)
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is type(None):
        return st.none()
    if hint is AssistantMessage:
        return assistant_messages
    if hint is Usage:
        return usages
    if hint is Any:  # JSON (RunCompleted.data): any JSON value
        return json_values
    origin = get_origin(hint)
    if origin is tuple and get_args(hint)[0] is Attachment:
        return st.lists(attachments, max_size=2).map(tuple)
    if origin is tuple and get_args(hint)[0] == Message:
        return st.lists(messages, max_size=3).map(tuple)
    if origin is Literal:
        return st.sampled_from(get_args(hint))
    if origin in (types.UnionType, typing.Union):
        return st.one_of(*(strategy_for_hint(arm) for arm in get_args(hint)))
    if origin is dict or hint is dict:
        return json_objects
    raise TypeError(f"no strategy for event field type {hint!r}")


@functools.cache
def events_of(cls: type[Any]) -> st.SearchStrategy[Event]:
    """Arbitrary instances of one event class; defaulted fields are often left at default."""
    hints = get_type_hints(cls)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields(cls):
        strategy = strategy_for_hint(hints[f.name])
        if f.default is not MISSING:
            strategy = st.just(f.default) | strategy
        kwargs[f.name] = strategy
    return st.builds(cls, **kwargs)


@functools.cache
def events() -> st.SearchStrategy[Event]:
    """Any event of any kind."""
    return st.one_of(*(events_of(cls) for cls in EVENT_TYPES.values()))


def sample_value(hint: Any) -> Any:
    """One valid, non-default-looking value for a field type (for table tests)."""
    if hint is str:
        return "s"
    if hint is bool:
        return True
    if hint is int:
        return 3
    if hint is float:
        return 1.5
    if hint is AssistantMessage:
        return AssistantMessage(text="t", tool_calls=(ToolCall(id="c", name="n", arguments="{}"),))
    if hint is Usage:
        return Usage(input_tokens=1, output_tokens=2)
    if hint is Any:  # JSON (RunCompleted.data)
        return [{"k": 1}, "v"]
    origin = get_origin(hint)
    if origin is tuple and get_args(hint)[0] is Attachment:
        return (Attachment(kind="image", media_type="image/png", digest="sha256:ab"),)
    if origin is tuple and get_args(hint)[0] == Message:
        return (UserMessage(content="u"), AssistantMessage(text="a"))
    if origin is Literal:
        return get_args(hint)[-1]
    if origin in (types.UnionType, typing.Union):
        return sample_value(next(a for a in get_args(hint) if a is not type(None)))
    if origin is dict or hint is dict:
        return {"k": [1, "v"]}
    raise TypeError(f"no sample for event field type {hint!r}")


def sample_event(cls: type[Any]) -> Event:
    """An instance of ``cls`` with every field set to a sample value."""
    hints = get_type_hints(cls)
    event: Event = cls(**{f.name: sample_value(hints[f.name]) for f in fields(cls)})
    return event


# -- hand-built logs for table tests ---------------------------------------------------------

RUN_ID = "run-1"
"""The run id of every hand-built and generated log."""


def created() -> RunCreated:
    return RunCreated(run_id=RUN_ID, agent="agent", input="hello", config={"max_turns": 3})


def started(epoch: int = 1) -> RunStarted:
    return RunStarted(owner=f"w{epoch}", epoch=epoch)


def reply(
    turn: int, *call_ids: str, text: str = "", stop_reason: str = "end_turn"
) -> AssistantMessageRecorded:
    """The reply of ``turn``; call ``x`` is a call of tool ``tool_x``."""
    calls = tuple(ToolCall(id=i, name=f"tool_{i}", arguments="{}") for i in call_ids)
    return AssistantMessageRecorded(
        turn_index=turn,
        message=AssistantMessage(text=text, tool_calls=calls, stop_reason=stop_reason),
        usage=Usage(input_tokens=10, output_tokens=2),
    )


def request(
    turn: int, call_id: str, effect: Any = "read_only", rejection: str | None = None
) -> ToolCallRequested:
    return ToolCallRequested(
        turn_index=turn,
        tool_call_id=call_id,
        name=f"tool_{call_id}",
        arguments="{}",
        effect_class=effect,
        idempotency_key=idempotency_key(RUN_ID, call_id),
        rejection=rejection,
    )


def result(turn: int, call_id: str, source: Any = "executed", attempt: int = 1) -> Any:
    return ToolResultRecorded(
        turn_index=turn,
        tool_call_id=call_id,
        name=f"tool_{call_id}",
        content=f"result of {call_id}",
        source=source,
        attempt=attempt,
    )


def start(turn: int, call_id: str, attempt: int = 1) -> ToolCallStarted:
    return ToolCallStarted(
        turn_index=turn,
        tool_call_id=call_id,
        attempt=attempt,
        effect_id=effect_id(RUN_ID, turn, call_id, attempt),
    )


def ask(turn: int, call_id: str, reason: Any = "policy") -> ApprovalRequested:
    return ApprovalRequested(turn_index=turn, tool_call_id=call_id, reason=reason, token="tok")


RUNNING_T0: list[Event] = [created(), started(), TurnStarted(turn_index=0)]
REPLIED: list[Event] = [*RUNNING_T0, reply(0, text="done")]
AWAITING_TWO: list[Event] = [*RUNNING_T0, reply(0, "a", "b"), request(0, "a"), request(0, "b")]
A_DONE: list[Event] = [*AWAITING_TWO, result(0, "a")]
BOTH_DONE: list[Event] = [*A_DONE, result(0, "b")]
NI_STARTED: list[Event] = [
    *RUNNING_T0,
    reply(0, "a"),
    request(0, "a", "non_idempotent"),
    start(0, "a"),
]
POLICY_WAIT: list[Event] = [*AWAITING_TWO, ask(0, "a")]
COMPLETED: list[Event] = [*REPLIED, RunCompleted(output="done")]
FAILED: list[Event] = [*RUNNING_T0, RunFailed(code="provider_unavailable", phase="model")]
CANCELLED: list[Event] = [created(), RunCancelled(reason="stop")]
TIMED_OUT: list[Event] = [*POLICY_WAIT, RunTimedOut(reason="deadline")]


# -- valid run logs --------------------------------------------------------------------------

Batch = list[Event]

RECOVERY_SCRIPTS: dict[str, tuple[str, ...]] = {
    "read_only": ("plain", "rerun", "policy_approve", "policy_deny"),
    "idempotent_write": ("plain", "rerun", "policy_approve", "policy_deny"),
    "non_idempotent": (
        "plain",
        "started",
        "reconciled_done",
        "reconciled_not_done",
        "reconciled_unknown",
        "unknown_happened",
        "unknown_not_happened",
        "unknown_skip",
        "policy_approve",
        "policy_deny",
    ),
}
"""Per side-effect class, the life stories a call of that class may have."""


@dataclass
class RunLog:
    """A valid log, as the batches a runtime would append."""

    batches: list[Batch] = field(default_factory=list)
    """Transactions, in order."""
    script_of: dict[str, str] = field(default_factory=dict)
    """tool_call_id -> the recovery script it followed (for reading failures)."""

    @property
    def events(self) -> list[Event]:
        """All events, flattened."""
        return [e for batch in self.batches for e in batch]

    def boundaries(self) -> list[int]:
        """Event counts at which a batch ends: the prefixes a store can actually hold."""
        out, n = [0], 0
        for batch in self.batches:
            n += len(batch)
            out.append(n)
        return out


@dataclass
class _Call:
    turn: int
    call_id: str
    name: str
    script: list[Batch]
    attempts: int = 0
    approval: ApprovalRequested | None = None


def _result(
    call: _Call, attempt: int, source: str = "executed", *, is_error: bool = False
) -> ToolResultRecorded:
    return ToolResultRecorded(
        turn_index=call.turn,
        tool_call_id=call.call_id,
        name=call.name,
        content=f"{source} {call.call_id} #{attempt}",
        is_error=is_error,
        source=source,
        attempt=attempt,
    )


def _script(kind: str, c: _Call, edited: str | None) -> list[Batch]:
    t, i = c.turn, c.call_id

    def start(attempt: int) -> ToolCallStarted:
        return ToolCallStarted(
            turn_index=t,
            tool_call_id=i,
            attempt=attempt,
            effect_id=effect_id(RUN_ID, t, i, attempt),
        )

    def ask(reason: Literal["outcome_unknown", "policy"]) -> ApprovalRequested:
        return ApprovalRequested(
            turn_index=t,
            tool_call_id=i,
            reason=reason,
            payload={"tool": c.name, "arguments": {"x": 1}},
            token=f"tok-{i}",
        )

    def decided(decision: Any, arguments: str | None = None) -> ApprovalDecided:
        return ApprovalDecided(
            turn_index=t,
            tool_call_id=i,
            decision=decision,
            by="ops",
            reason="not now" if decision == "deny" else "",
            arguments=arguments,
        )

    def unknown() -> ToolOutcomeUnknown:
        return ToolOutcomeUnknown(turn_index=t, tool_call_id=i, reason="worker died")

    def reconciled(verdict: Any) -> ToolReconciled:
        return ToolReconciled(turn_index=t, tool_call_id=i, verdict=verdict)

    scripts: dict[str, list[Batch]] = {
        "plain": [[_result(c, 1)]],
        "rerun": [[start(1)], [start(2)], [_result(c, 2)]],
        "started": [[start(1)], [_result(c, 1)]],
        "reconciled_done": [[start(1)], [reconciled("done"), _result(c, 1, "reconciled")]],
        "reconciled_not_done": [[start(1)], [reconciled("not_done")], [start(2)], [_result(c, 2)]],
        "reconciled_unknown": [
            [start(1)],
            [reconciled("unknown"), unknown(), ask("outcome_unknown")],
            [decided("happened"), _result(c, 1, "approval")],
        ],
        "unknown_happened": [
            [start(1)],
            [unknown(), ask("outcome_unknown")],
            [decided("happened"), _result(c, 1, "approval")],
        ],
        "unknown_not_happened": [
            [start(1)],
            [unknown(), ask("outcome_unknown")],
            [decided("not_happened")],
            [start(2)],
            [_result(c, 2)],
        ],
        "unknown_skip": [
            [start(1)],
            [unknown(), ask("outcome_unknown")],
            [decided("skip"), _result(c, 1, "approval", is_error=True)],
        ],
        "policy_approve": [
            [ask("policy")],
            [decided("approve", edited)],
            [start(1)],
            [_result(c, 1)],
        ],
        "policy_deny": [
            [ask("policy")],
            [decided("deny"), _result(c, 0, "approval", is_error=True)],
        ],
    }
    return scripts[kind]


class _Sim:
    """Tracks just enough to keep the generated log legal."""

    def __init__(self) -> None:
        self.log = RunLog()
        self.epoch = 0
        self.usage = Usage()

    def emit(self, *events: Event) -> None:
        self.log.batches.append(list(events))

    def start(self) -> None:
        self.epoch += 1
        self.emit(RunStarted(owner=f"worker-{self.epoch}", epoch=self.epoch))


@st.composite
def run_logs(draw: st.DrawFn, max_turns: int = 4) -> RunLog:
    """A valid log of one run; it may end in any state, including mid-turn."""
    sim = _Sim()
    sim.emit(
        RunCreated(
            run_id=RUN_ID,
            agent="agent",
            input=draw(st.text(max_size=8)),
            session_id="sess",
            correlation_id="corr",
            config=draw(st.none() | json_objects),
        )
    )
    if draw(st.integers(0, 7)) == 0:  # cancelled while queued
        if draw(st.booleans()):
            sim.emit(RunCancelRequested(reason="before start"))
        sim.emit(RunCancelled(reason="before start"))
        if draw(st.booleans()):
            return sim.log
        sim.emit(RunRequeued(reason="resume"))
    sim.start()

    n_turns = draw(st.integers(1, max_turns))
    for turn in range(n_turns):
        if turn == n_turns - 1 and draw(st.booleans()):
            sim.emit(
                TurnStarted(turn_index=turn),
                NoticeInjected(turn_index=turn, content="last turn", reason="final_turn"),
            )
        else:
            sim.emit(TurnStarted(turn_index=turn))
        for attempt in range(1, draw(st.integers(0, 2)) + 1):
            sim.emit(
                ModelCallFailed(
                    turn_index=turn, attempt=attempt, code="rate_limited", message="429"
                )
            )
        if draw(st.integers(0, 9)) == 0:  # the model call failed for good
            sim.emit(RunFailed(code="provider_unavailable", phase="model", message="down"))
            if draw(st.booleans()):
                return sim.log
            sim.emit(RunRequeued(reason="retry"))
            sim.start()
        if draw(st.integers(0, 9)) == 0:
            sim.emit(RunRecovered(owner="rescuer", epoch=sim.epoch + 1, previous_owner="w"))
            sim.epoch += 1
        if draw(st.integers(0, 7)) == 0:  # the step failed (a bug), by one or more claimants
            for _ in range(draw(st.integers(1, 2))):
                sim.emit(
                    StepFailed(step=f"call_model (turn {turn})", error_type="E", message="bug")
                )

        final = turn == n_turns - 1
        n_calls = 0 if final else draw(st.integers(1, 3))
        calls: list[_Call] = []
        requests: list[Event] = []
        rejected: list[Event] = []
        tcs: list[ToolCall] = []
        for j in range(n_calls):
            call_id = f"call_{turn}_{j}"
            effect = draw(st.sampled_from(["read_only", "idempotent_write", "non_idempotent"]))
            is_rejected = draw(st.integers(0, 5)) == 0
            if is_rejected:
                kind = draw(st.sampled_from(["rejected", "limit", "loop"]))
            else:
                kind = draw(st.sampled_from(RECOVERY_SCRIPTS[effect]))
            name = "unknown_tool" if is_rejected else f"tool_{effect}"
            tcs.append(ToolCall(id=call_id, name=name, arguments='{"x":1}'))
            requests.append(
                ToolCallRequested(
                    turn_index=turn,
                    tool_call_id=call_id,
                    name=name,
                    arguments='{"x":1}',
                    effect_class=None if is_rejected else effect,
                    idempotency_key=idempotency_key(RUN_ID, call_id),
                    rejection=f"refused ({kind})" if is_rejected else None,
                    requires_approval=kind.startswith("policy_"),
                )
            )
            c = _Call(turn=turn, call_id=call_id, name=name, script=[])
            if is_rejected:
                if kind == "loop":
                    rejected.append(
                        LoopDetected(turn_index=turn, tool_call_id=call_id, name=name, repeats=3)
                    )
                rejected.append(_result(c, 0, kind, is_error=True))
                sim.log.script_of[call_id] = kind
                continue
            edited = draw(st.none() | st.just('{"x":2}'))
            c.script = _script(kind, c, edited)
            sim.log.script_of[call_id] = kind
            calls.append(c)
        usage = draw(usages)
        sim.usage = sim.usage + usage
        text = draw(st.text(max_size=8))
        sim.emit(
            AssistantMessageRecorded(
                turn_index=turn,
                message=AssistantMessage(
                    text=text,
                    tool_calls=tuple(tcs),
                    stop_reason="tool_use" if tcs else "end_turn",
                ),
                usage=usage,
                model="m",
            ),
            *requests,
            *rejected,
        )
        if final:
            if draw(st.integers(0, 4)) > 0:
                sim.emit(RunCompleted(output=text, stop_reason="end_turn", usage=sim.usage))
            return sim.log

        # Settle the calls, interleaved in any order, with interruptions.
        while any(c.script for c in calls):
            open_calls = [c for c in calls if c.script]
            waiting = [c for c in open_calls if c.approval is not None]
            if draw(st.integers(0, 11)) == 0:
                what = draw(st.sampled_from(["cancel", "timeout" if waiting else "fail"]))
                if what == "cancel":
                    if draw(st.booleans()):  # asked first, carried out by the owner later
                        sim.emit(RunCancelRequested(reason="user", by="alice"))
                    sim.emit(
                        *(_result(c, c.attempts, "cancelled", is_error=True) for c in open_calls),
                        RunCancelled(reason="user"),
                    )
                    for c in open_calls:
                        c.script = []
                        c.approval = None
                    if draw(st.booleans()):
                        return sim.log
                    sim.emit(RunRequeued(reason="resume"))
                    sim.start()
                    break
                if what == "timeout":
                    sim.emit(RunTimedOut(reason="approval deadline"))
                else:
                    sim.emit(RunFailed(code="tool_error", phase="tool", message="boom"))
                if draw(st.booleans()):
                    return sim.log
                sim.emit(RunRequeued(reason="resume"))
                sim.start()
                sim.emit(TurnResumed(turn_index=turn))
                for c in waiting:  # the timeout dropped their approvals: ask again
                    assert c.approval is not None
                    c.script.insert(0, [c.approval])
                    c.approval = None
                continue
            c = draw(st.sampled_from(open_calls))
            batch = c.script.pop(0)
            for e in batch:
                if isinstance(e, ToolCallStarted):
                    c.attempts = e.attempt
                elif isinstance(e, ApprovalRequested):
                    c.approval = e
                elif isinstance(e, ApprovalDecided):
                    c.approval = None
            sim.emit(*batch)
    return sim.log  # pragma: no cover - the final turn returns
