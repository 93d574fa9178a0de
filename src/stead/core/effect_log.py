"""A run's effects, one row per key, read from its log (``stead effects list/show``).

Every model call attempt and every tool call attempt the run made (or may have made) is an
effect with a key (``stead.core.canonical.effect_id``). The run's log says, per key, how it
ended: settled (a reply, a result), failed (a model failure, an error result), disposed (a
takeover's reconciler gave it up), unknown (it may or may not have happened: a later attempt
was made without knowing), or in flight (nothing recorded yet). Beside that: the
reconciler's verdicts on the key and its redispatches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from stead.core.canonical import effect_id
from stead.core.events import (
    AssistantMessageRecorded,
    EffectReconciled,
    Event,
    ModelCallFailed,
    ToolCallRequested,
    ToolCallStarted,
    ToolResultRecorded,
)
from stead.core.fold import RunState, apply
from stead.core.reconcile import Memory, Redispatches, targets

EffectState: TypeAlias = Literal["in_flight", "settled", "failed", "disposed", "unknown"]


@dataclass(slots=True, kw_only=True)
class EffectRecord:
    """One effect of a run, as its log tells it."""

    effect_id: str
    kind: Literal["model", "tool"]
    """A model call or a tool call."""
    turn_index: int
    tool_call_id: str
    """Its call; "" for a model call."""
    name: str
    """The tool's name, or "model"."""
    attempt: int
    """The attempt its key names."""
    state: EffectState = "in_flight"
    """How it ended, so far."""
    detail: str = ""
    """The failure code, the result's first words, the verdict's reason."""
    seqs: list[int] = field(default_factory=list)
    """Sequence numbers of the events about it."""
    verdicts: list[EffectReconciled] = field(default_factory=list)
    """The reconciler's verdicts on it, in order."""
    redispatch: Redispatches = field(default_factory=Redispatches)
    """Its redispatch records, folded."""


def effect_records(events: Iterable[tuple[int, Event]]) -> list[EffectRecord]:
    """The effects of a run from its ``(seq, event)`` log, in the order they began."""
    state = RunState()
    memory = Memory()
    rows: dict[str, EffectRecord] = {}
    latest: dict[tuple[int, str], EffectRecord] = {}
    names: dict[str, str] = {}

    def row(turn: int, call: str, attempt: int, seq: int) -> EffectRecord:
        key = effect_id(state.run_id, turn, call or "model", attempt)
        r = rows.get(key)
        if r is None:
            r = rows[key] = EffectRecord(
                effect_id=key,
                kind="tool" if call else "model",
                turn_index=turn,
                tool_call_id=call,
                name=names.get(call, "model") if call else "model",
                attempt=attempt,
            )
            before = latest.get((turn, call))
            if before is not None and before.state == "in_flight":
                before.state = "unknown"  # another attempt began: this one may have run
            latest[(turn, call)] = r
        r.seqs.append(seq)
        return r

    for seq, e in events:
        memory.see(e)
        match e:
            case ModelCallFailed():
                r = row(e.turn_index, "", e.attempt, seq)
                r.state, r.detail = "failed", e.code
            case AssistantMessageRecorded():
                r = row(e.turn_index, "", state.model_failures + 1, seq)
                r.state, r.detail = "settled", e.model or "reply"
            case ToolCallRequested():
                names[e.tool_call_id] = e.name
            case ToolCallStarted():
                row(e.turn_index, e.tool_call_id, e.attempt, seq)
            case ToolResultRecorded() if e.source in ("executed", "reconciled"):
                r = row(e.turn_index, e.tool_call_id, e.attempt, seq)
                r.state = "failed" if e.is_error else "settled"
                r.detail = e.content[:60] if e.source == "executed" else "reconciled"
            case EffectReconciled():
                r = row(e.turn_index, e.tool_call_id, e.attempt, seq)
                r.verdicts.append(e)
                if e.verdict == "dispose":
                    r.state, r.detail = "disposed", e.reason
        apply(state, e, seq)
    flying = {t.effect_id for t in targets(state)}
    for t in targets(state):  # what is in flight now has a row too
        if t.effect_id not in rows:
            row(t.turn_index, t.tool_call_id, t.attempt, state.seq)
    for r in rows.values():
        r.redispatch = memory.redispatches_of(r.effect_id)
        if r.state == "in_flight" and r.effect_id not in flying:
            r.state = "unknown"  # nothing settled it, and nothing runs it any more
    return list(rows.values())
