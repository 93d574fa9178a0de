"""The API's answers made from a runtime's runs: summaries, details, approvals, events, the
live stream's frames and the list's cursors. Routes call these; they decide nothing."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any, Final

from stead.core.event_codec import encode
from stead.core.events import AssistantMessageRecorded
from stead.core.fold import RunState, apply
from stead.core.messages import Usage
from stead.core.pricing import PriceTable
from stead.core.progress import ProgressRead
from stead.core.states import FINISHED, RunStatus
from stead.errors import CorruptEvent, IllegalTransition, UserError
from stead.runtime import Runtime, RunView, resume_refusal
from stead.server._models import (
    MAX_INT,
    ApprovalOut,
    EventOut,
    RunDetail,
    RunSummary,
    UsageOut,
)
from stead.store import RunRecord, StoredEvent

_DEFAULT_PRICES = PriceTable()


def prices(rt: Runtime, agent: str) -> PriceTable:
    """The agent's prices, or the defaults for an agent this server does not have."""
    known = rt.agents.get(agent)
    return known.prices if known is not None else _DEFAULT_PRICES


def _cost(rt: Runtime, agent: str, usage: Usage) -> float | None:
    known = rt.agents.get(agent)
    if known is None:
        return None
    return known.prices.cost(usage, known.model.model_name)


class Waits:
    """Seconds each finished run waited on a person, read from its log (``Runtime.steps``)
    once: a finished run's log does not change until it is resumed, which moves its last
    sequence number, the key here. Bounded: the oldest entries go first."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._known: OrderedDict[tuple[str, int], float] = OrderedDict()

    async def of(self, rt: Runtime, record: RunRecord) -> float:
        key = (record.run_id, record.last_seq)
        if key in self._known:
            self._known.move_to_end(key)
            return self._known[key]
        waited = (await rt.steps(record.run_id)).waited_s
        self._known[key] = waited
        if len(self._known) > self._size:
            self._known.popitem(last=False)
        return waited


async def summary(rt: Runtime, record: RunRecord, waits: Waits | None = None) -> RunSummary:
    """A run as a row of the list. A run whose log cannot be read (a row that does not
    decode or does not follow from the ones before it) is listed all the same, from its
    runs row, marked ``damaged`` with what is wrong: one damaged run hides no other.
    ``waits`` (the server's) gives a finished run's waiting time in all."""
    try:
        state = await rt.state(record.run_id)
        view = RunView.of(state, rt.agents)
        if waits is not None and view.status in FINISHED:
            waited = await waits.of(rt, record)
            return RunSummary(**_summary_fields(rt, record, view, state), waited_s=waited)
    except (CorruptEvent, IllegalTransition) as why:
        return RunSummary(
            run_id=record.run_id,
            agent=record.agent,
            status=RunStatus(record.status),
            session_id=record.session_id,
            correlation_id=record.correlation_id,
            created_at=record.created_at,
            updated_at=record.updated_at,
            seq=record.last_seq,
            turns=0,
            usage=UsageOut(input_tokens=0, output_tokens=0),
            cost_usd=None,
            leased_by=None,
            damaged=str(why),
        )
    return RunSummary(**_summary_fields(rt, record, view, state))


PREVIEW: Final = 160
"""Characters of a run's input and output a row of the list shows."""


def _preview(text: str | None) -> str | None:
    if text is None:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW else flat[: PREVIEW - 1] + "…"


def _summary_fields(
    rt: Runtime, record: RunRecord, view: RunView, state: RunState
) -> dict[str, Any]:
    output = view.output
    if view.data_json is not None:
        output = json.dumps(view.data_json, ensure_ascii=False)
    waiting = view.status is RunStatus.AWAITING_APPROVAL
    return {
        "run_id": record.run_id,
        "agent": record.agent,
        "status": view.status,
        "session_id": record.session_id,
        "correlation_id": record.correlation_id,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "seq": view.seq,
        "turns": view.turns,
        "usage": _usage(view.usage),
        "cost_usd": _cost(rt, record.agent, view.usage),
        "leased_by": record.lease_owner if (record.lease_expires_at or 0) > rt.clock() else None,
        "input_preview": _preview(state.input) or "",
        "output_preview": _preview(output),
        "error_code": (view.error or {}).get("code"),
        "waiting_s": max(0.0, rt.clock() - record.updated_at) if waiting else None,
    }


async def detail(rt: Runtime, run_id: str) -> RunDetail:
    """One run in full, with the path of states its log went through."""
    record = await rt.store.get_run(run_id)
    log_events = await rt.events(run_id)
    path: list[RunStatus] = []
    state = RunState()
    for stored in log_events:
        apply(state, stored.event)
        if state.status is not None and (not path or path[-1] is not state.status):
            path.append(state.status)
    view = RunView.of(state)
    return RunDetail(
        **_summary_fields(rt, record, view, state),
        input=state.input,
        output=view.output,
        data=view.data_json,
        stop_reason=view.stop_reason,
        error=view.error,
        approvals=approvals(rt, state),
        path=path,
        resume_refusal=resume_refusal(state, rt.agents),
    )


_AS_REQUESTED: Final = ("tool_call_id", "reason", "deadline", "turn_index")
"""What an approval shows as its ``approval_requested`` event says it."""


def approvals(rt: Runtime, state: RunState, parents: tuple[str, ...] = ()) -> list[ApprovalOut]:
    """The run's calls waiting on a person (without their tokens; not those waiting on a
    child run: its end settles them, no person does); ``parents``: the run's parent chain."""
    agent = rt.agents.get(state.agent)
    out = []
    for a in state.approvals.values():
        if a.reason == "child":
            continue
        call = state.calls[a.tool_call_id]
        tool = agent.registry.get(call.name) if agent else None
        as_requested = {name: getattr(a, name) for name in _AS_REQUESTED}
        out.append(
            ApprovalOut(
                run_id=state.run_id,
                agent=state.agent,
                tool=call.name,
                payload=dict(a.payload or {}),
                arguments=call.arguments,
                effect_class=str(call.effect_class) if call.effect_class else None,
                parameters=tool.parameters if tool else None,
                parents=list(parents),
                **as_requested,
            )
        )
    return out


async def sse(
    rt: Runtime, run_id: str, after: int, table: PriceTable, heartbeat: float
) -> AsyncIterator[str]:
    """The run's live stream as server-sent events."""
    yield "retry: 1000\n\n"
    async for item in rt.follow(run_id, after, heartbeat=heartbeat):
        if item is None:
            yield ": heartbeat\n\n"
        elif isinstance(item, ProgressRead):
            yield f"event: progress\ndata: {json.dumps(_progress(item))}\n\n"
        else:
            data = event(item, table).model_dump_json()
            yield f"id: {item.seq}\nevent: event\ndata: {data}\n\n"
    yield "event: end\ndata: {}\n\n"


def _usage(u: Usage) -> UsageOut:
    return UsageOut(**{name: getattr(u, name) for name in UsageOut.model_fields})


def event(stored: StoredEvent, table: PriceTable) -> EventOut:
    """One stored event as the API shows it (an approval's token left out)."""
    kind, version, data = encode(stored.event)
    if kind == "approval_requested":
        data.pop("token", None)  # single-use approval tokens never leave the store
    cost = None
    e = stored.event
    if isinstance(e, AssistantMessageRecorded):
        cost = table.cost(e.usage, e.model)
    return EventOut(
        seq=stored.seq, kind=kind, v=version, at=stored.created_at, data=data, cost_usd=cost
    )


def _progress(read: ProgressRead) -> dict[str, Any]:
    frames = read.frames
    return {
        "turn_index": frames[0].turn_index if frames else None,
        "generation": read.cursor.generation,
        "first_sequence": frames[0].sequence if frames else None,
        "sequence": read.cursor.sequence,
        "text": "".join(f.text for f in frames),
        "reset": read.reset,
        "gap": read.gap,
    }


def text_query(q: str) -> str:
    """The search text of a list request: valid text without NUL (a store refuses it)."""
    if "\x00" in q:
        raise UserError("the search text must not contain NUL characters")
    try:
        q.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError("the search text must be valid Unicode text") from None
    return q


def decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    """A list cursor this server gave, back to (updated_at, run_id)."""
    if cursor is None:
        return None
    try:
        updated, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not isinstance(run_id, str) or isinstance(updated, bool):
            raise TypeError("not a cursor")
        when = float(updated)
        run_id.encode("utf-8")
        if not math.isfinite(when):
            raise ValueError("not a time")
        return when, run_id
    except (
        ValueError,
        TypeError,
        OverflowError,
        binascii.Error,
        UnicodeError,
        RecursionError,
    ) as exc:
        raise UserError("cursor is not one this server gave; start again without it") from exc


_SEQ = re.compile(r"[0-9]{1,19}")
"""A sequence number as a header carries it: ASCII digits (``str.isdigit`` takes ``²``,
which ``int`` refuses), at most as many as the largest a store holds."""


def last_event_id(header: str) -> int:
    """A ``Last-Event-ID`` header as the seq it names; ``UserError`` (400) for anything but
    the ASCII digits of a seq a store can hold."""
    text = header.strip()
    if not _SEQ.fullmatch(text) or int(text) > MAX_INT:
        raise UserError(
            "Last-Event-ID must be the seq of the last event received (ASCII digits, at most "
            f"{MAX_INT})"
        )
    return int(text)


def encode_cursor(record: RunRecord) -> str:
    """The cursor of the page after ``record``."""
    raw = json.dumps([record.updated_at, record.run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode()
