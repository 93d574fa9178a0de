"""Valid run logs built from the real event classes, for the store contract suite.

Two layers: pure functions that return the events of one step (a tool turn, a final turn),
and ``RunBuilder``, which folds every event it hands out with ``stead.core.fold.apply`` (so a
log a test writes is one the core accepts) and remembers what the store already holds.
The store itself never validates a log; building valid ones keeps the tests honest about
what a real run writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from stead.core.canonical import canonical_json, idempotency_key
from stead.core.event_codec import decode, encode
from stead.core.events import (
    AgentChanged,
    AgentRecorded,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageRecorded,
    EffectReconciled,
    Event,
    LoopDetected,
    ModelCallFailed,
    NoticeInjected,
    RedispatchRecorded,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunDeadlineSet,
    RunFailed,
    RunForked,
    RunRecovered,
    RunRequeued,
    RunStarted,
    RunTimedOut,
    StepFailed,
    ToolAttemptFailed,
    ToolCallDeferred,
    ToolCallRequested,
    ToolCallStarted,
    ToolOutcomeUnknown,
    ToolReconciled,
    ToolResultRecorded,
    ToolsListed,
    TraceLinked,
    TurnResumed,
    TurnStarted,
)
from stead.core.fold import RunState, apply
from stead.core.messages import AssistantMessage, Attachment, ToolCall, Usage, UserMessage
from stead.store import Store

T0 = 1_700_000_000.0
"""A fixed "now" (seconds since the epoch); tests pass time explicitly."""

TOOL = "lookup"
"""The tool every built turn calls."""


def created(run_id: str, *, input: str = "Find order 42", **kw: Any) -> RunCreated:
    """A run_created event with a recognisable agent name."""
    return RunCreated(run_id=run_id, agent="support", input=input, **kw)


def call_id(turn: int, index: int) -> str:
    """The id a model would give call ``index`` of ``turn``."""
    return f"call_{turn}_{index}"


def arguments(turn: int, index: int, size: int = 40) -> dict[str, Any]:
    """Tool arguments of roughly ``size`` bytes once serialised."""
    pad = max(0, size - 40)
    return {"query": f"order {turn}-{index}", "note": "n" * pad}


def tool_turn(
    run_id: str,
    turn: int,
    *,
    calls: int = 1,
    text: str = "",
    arg_size: int = 40,
    result_size: int = 20,
    results: bool = True,
    ids: Sequence[str] | None = None,
) -> list[Event]:
    """turn_started, the reply with ``calls`` tool calls, their intents, and (optionally)
    their results: what one complete tool turn appends. ``ids`` overrides the call ids."""
    names = list(ids) if ids is not None else [call_id(turn, i) for i in range(calls)]
    tool_calls = tuple(
        ToolCall(id=cid, name=TOOL, arguments=json.dumps(arguments(turn, i, arg_size)))
        for i, cid in enumerate(names)
    )
    events: list[Event] = [
        TurnStarted(turn_index=turn),
        AssistantMessageRecorded(
            turn_index=turn,
            message=AssistantMessage(text=text, tool_calls=tool_calls, stop_reason="tool_use"),
            usage=Usage(input_tokens=100 + turn, output_tokens=20),
            model="scripted",
        ),
    ]
    events += [
        ToolCallRequested(
            turn_index=turn,
            tool_call_id=c.id,
            name=c.name,
            arguments=canonical_json(json.loads(c.arguments)),
            effect_class="read_only",
            idempotency_key=idempotency_key(run_id, c.id),
        )
        for c in tool_calls
    ]
    if results:
        events += [result(turn, c.id, size=result_size) for c in tool_calls]
    return events


def result(turn: int, call: str, *, size: int = 20, content: str | None = None) -> Event:
    """The (one) result of a call."""
    body = content if content is not None else f"{call}:" + "r" * max(0, size - len(call) - 1)
    return ToolResultRecorded(turn_index=turn, tool_call_id=call, name=TOOL, content=body)


def final_turn(turn: int, text: str = "Order 42 ships tomorrow.") -> list[Event]:
    """turn_started, a reply without tool calls, and run_completed."""
    usage = Usage(input_tokens=10, output_tokens=5)
    return [
        TurnStarted(turn_index=turn),
        AssistantMessageRecorded(
            turn_index=turn, message=AssistantMessage(text=text), usage=usage, model="scripted"
        ),
        RunCompleted(output=text, usage=usage),
    ]


def fold_log(events: Sequence[Event]) -> RunState:
    """Fold events from nothing, validating each (seqs counted from 1)."""
    state = RunState()
    for seq, e in enumerate(events, start=1):
        apply(state, e, seq)
    return state


class RunBuilder:
    """A valid log under construction, and how much of it the store already holds."""

    def __init__(self, run_id: str, **created_kw: Any) -> None:
        self.run_id = run_id
        self.created = created(run_id, **created_kw)
        self.state = RunState()
        apply(self.state, self.created)
        self.log: list[Event] = [self.created]
        """Every event so far, written or not."""
        self.pending: list[Event] = []
        """Events not yet appended."""
        self.written = 0
        """The last seq the store holds."""
        self.next_turn = 0

    @property
    def status(self) -> str:
        """The run's status after every event so far."""
        assert self.state.status is not None
        return self.state.status.value

    def add(self, *events: Event) -> list[Event]:
        """Validate ``events`` against the log so far and queue them for the next write."""
        for e in events:
            apply(self.state, e)
            self.log.append(e)
            self.pending.append(e)
        return list(events)

    def start(self, owner: str = "worker-1", epoch: int = 0) -> list[Event]:
        """run_started."""
        return self.add(RunStarted(owner=owner, epoch=epoch))

    def tool_turn(self, **kw: Any) -> list[Event]:
        """The next turn, with tool calls (see ``tool_turn``)."""
        turn, self.next_turn = self.next_turn, self.next_turn + 1
        return self.add(*tool_turn(self.run_id, turn, **kw))

    def final_turn(self, text: str = "Order 42 ships tomorrow.") -> list[Event]:
        """The next turn, final."""
        turn, self.next_turn = self.next_turn, self.next_turn + 1
        return self.add(*final_turn(turn, text))

    async def create(self, store: Store, *, now: float = T0) -> None:
        """Write run_created."""
        await store.create_run(self.created, now=now)
        self.written = 1

    async def flush(
        self, store: Store, *, epoch: int = 0, now: float = T0, snapshot: bool = False
    ) -> int:
        """Append every pending event in one batch (optionally with a snapshot)."""
        seq = await store.append(
            self.run_id,
            self.pending,
            expected_seq=self.written,
            epoch=epoch,
            status=self.status,
            now=now,
            snapshot=(self.state.seq, self.state.to_json()) if snapshot else None,
        )
        self.written, self.pending = seq, []
        return seq


async def seeded(
    store: Store, run_id: str, *, turns: int = 1, calls: int = 1, now: float = T0
) -> RunBuilder:
    """A created, started run with ``turns`` complete tool turns written (status
    awaiting_tool, the next turn not yet started)."""
    b = RunBuilder(run_id)
    await b.create(store, now=now)
    b.start()
    for _ in range(turns):
        b.tool_turn(calls=calls)
    await b.flush(store, now=now + 1)
    return b


PICTURE = Attachment(kind="image", media_type="image/png", digest="sha256:00ff", name="p.png")


def every_kind() -> list[Event]:
    """One event of every kind, with every optional field set away from its default.

    Not a valid log (the store does not care); it pins the codec round trip through a store.
    """
    msg = AssistantMessage(
        text='Ünïcödé "quotes" \\ and\nnewlines 🚀',
        tool_calls=(ToolCall(id="c1", name=TOOL, arguments='{"q": "x"}'),),
        stop_reason="tool_use",
    )
    usage = Usage(
        input_tokens=1, output_tokens=2, cache_creation_input_tokens=3, cache_read_input_tokens=4
    )
    return [
        created(
            "run-kinds",
            session_id="s",
            correlation_id="corr",
            config={"limits": {"turns": 3}},
            history=(
                UserMessage(content="earlier", attachments=(PICTURE,)),
                AssistantMessage(text="an answer"),
            ),
            history_from="run-before",
            attachments=(PICTURE,),
        ),
        RunStarted(owner="w", epoch=1),
        RunRecovered(owner="w2", epoch=2, previous_owner="w"),
        TurnStarted(turn_index=0),
        TurnResumed(turn_index=0),
        NoticeInjected(turn_index=0, content="This is your last turn.", reason="final_turn"),
        ModelCallFailed(
            turn_index=0,
            attempt=2,
            code="rate_limited",
            message="slow down",
            usage=Usage(input_tokens=12),
        ),
        AssistantMessageRecorded(
            turn_index=0, message=msg, usage=usage, model="m", settings={"temperature": 0.5}
        ),
        ToolCallRequested(
            turn_index=0,
            tool_call_id="c1",
            name=TOOL,
            arguments='{"q":"x"}',
            effect_class=None,
            idempotency_key=idempotency_key("run-kinds", "c1"),
            rejection="unknown tool",
            requires_approval=True,
            final=True,
        ),
        LoopDetected(turn_index=0, tool_call_id="c1", name=TOOL, repeats=3),
        ToolCallStarted(turn_index=0, tool_call_id="c1", attempt=3, effect_id="e" * 32),
        ToolResultRecorded(
            turn_index=0,
            tool_call_id="c1",
            name=TOOL,
            content="",
            is_error=True,
            source="rejected",
            attempt=0,
        ),
        ToolAttemptFailed(
            turn_index=0, tool_call_id="c1", attempt=1, error="Boom: down", retry_in=0.25
        ),
        ToolOutcomeUnknown(turn_index=0, tool_call_id="c1", reason="worker died"),
        ToolCallDeferred(turn_index=0, tool_call_id="c1", attempt=1, ask="approval", reason="big"),
        ToolReconciled(turn_index=0, tool_call_id="c1", verdict="unknown"),
        ApprovalRequested(
            turn_index=0,
            tool_call_id="c1",
            reason="policy",
            payload={"tool": TOOL, "n": [1, 2.5, None, True]},
            token="tok",
            deadline=T0 + 0.5,
        ),
        ApprovalDecided(
            turn_index=0,
            tool_call_id="c1",
            decision="approve",
            by="ops",
            reason="ok",
            arguments='{"q":"y"}',
        ),
        RunCompleted(
            output="done", stop_reason="max_tokens", usage=usage, data={"city": ["Paris", 1]}
        ),
        RunFailed(
            code="budget_exceeded",
            phase="runtime",
            message="too long",
            last_seq=9,
            details={"spent": 1.25, "budget": 1.0},
        ),
        StepFailed(step="run_tools (turn 2)", error_type="RuntimeError", message="a bug"),
        RunCancelRequested(reason="user", by="ops"),
        RunCancelled(reason="user"),
        RunTimedOut(reason="approval deadline"),
        RunDeadlineSet(deadline=T0 + 60, counts_waiting=False),
        RunRequeued(reason="resume"),
        EffectReconciled(
            turn_index=0,
            tool_call_id="c1",
            attempt=2,
            effect_id="e" * 32,
            observed="orphaned",
            verdict="defer",
            reason="the pool may recover it",
            epoch=3,
        ),
        RedispatchRecorded(
            effect_id="e" * 32, step="given_up", attempt=3, reason="budget spent", epoch=3
        ),
        ToolsListed(source="files", tools={"read": {"effect_class": "read_only", "n": [1]}}),
        TraceLinked(traceparent="00-" + "1" * 32 + "-" + "2" * 16 + "-01"),
        RunForked(source_run_id="run-source", at_turn=2, carried_results=3, dropped_calls=1),
        AgentRecorded(fingerprint="fp_" + "1" * 16, version="v1"),
        AgentChanged(
            from_fingerprint="fp_" + "1" * 16,
            to_fingerprint="fp_" + "2" * 16,
            from_version="v1",
            to_version="v2",
        ),
    ]


def to_wire(events: Sequence[Event]) -> str:
    """Events as JSON text, to hand to a child process."""
    return json.dumps([list(encode(e)) for e in events])


def from_wire(text: str) -> list[Event]:
    """The inverse of ``to_wire``."""
    return [decode(kind, version, data) for kind, version, data in json.loads(text)]
