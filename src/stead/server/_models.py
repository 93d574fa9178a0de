"""Typed request and response bodies of the HTTP API (the OpenAPI document is made of these).

Every string a caller sends is bounded, free of NUL characters (PostgreSQL refuses them
in text and JSON) and valid Unicode (JSON's ``"\ud800"`` escape is a lone surrogate UTF-8
cannot hold); edited arguments are plain JSON (finite numbers a store can hold, nested not
too deep): a request that does not fit is a 422 naming the field, never a 500.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from stead.core.states import RunStatus

MAX_INT = 2**63 - 1
"""The largest integer either store holds (SQLite INTEGER, PostgreSQL BIGINT)."""

_DEPTH = 32
"""How deeply edited arguments may nest."""


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (it holds a lone surrogate)") from None
    return value


def _plain_json(value: Any, depth: int = 0) -> Any:
    """Edited arguments as plain JSON: no NaN or infinity (a JSON parser that takes them is
    lenient, the log is not), integers a store holds, valid text, a bounded depth."""
    if depth > _DEPTH:
        raise ValueError(f"must not nest deeper than {_DEPTH} levels")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return _no_nul(value)
    if isinstance(value, int):
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise ValueError("must hold only integers of at most 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("must hold only finite numbers (not NaN or Infinity)")
        return value
    if isinstance(value, list):
        return [_plain_json(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_no_nul(k): _plain_json(v, depth + 1) for k, v in value.items()}
    raise ValueError(f"must hold only JSON values, not {type(value).__name__}")


Text = Annotated[str, Field(max_length=100_000), AfterValidator(_no_nul)]
Short = Annotated[str, Field(max_length=2_000), AfterValidator(_no_nul)]
Arguments = Annotated[dict[str, Any], AfterValidator(_plain_json)]
RunId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateRun(_Body):
    """Start a run of a registered agent (a worker drives it)."""

    agent: Short = Field(min_length=1)
    input: Text
    session_id: Short = ""
    correlation_id: Short = ""
    run_id: RunId | None = None


class Approve(_Body):
    """Approve a gated call, optionally with edited arguments (checked against its schema)."""

    arguments: Arguments | None = None
    reason: Short = ""
    token: Short | None = None


class Deny(_Body):
    """Deny a gated call; the model reads ``reason`` as the call's error result."""

    reason: Short = Field(min_length=1)
    token: Short | None = None


class Answer(_Body):
    """Answer the question of a call whose outcome is unknown: did it happen?"""

    decision: Literal["happened", "not_happened", "skip"]
    result: Text | None = None
    reason: Short = ""
    token: Short | None = None


class Fork(_Body):
    """Fork a run after one of its turns: its history through that turn, then ``input``
    (a new user message) or ``messages`` (messages as the export format writes them, the
    last a user message): one of the two."""

    at_turn: int = Field(ge=0)
    input: Text | None = None
    messages: list[Arguments] | None = Field(default=None, min_length=1, max_length=1_000)
    agent: Short | None = None


class Steer(_Body):
    """Cancel or resume a run, with a reason recorded in its log."""

    reason: Short = ""


class UsageOut(BaseModel):
    """Tokens a run (or one turn) consumed."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class ApprovalOut(BaseModel):
    """A call waiting on a person. The single-use approval token is never shown."""

    run_id: str
    agent: str
    tool_call_id: str
    tool: str
    reason: str
    payload: dict[str, Any]
    arguments: str
    effect_class: str | None
    parameters: dict[str, Any] | None
    deadline: float | None
    turn_index: int
    parents: list[str] = []
    """For a child run's call: the run that started it first, up to the root."""


class RunSummary(BaseModel):
    """One row of the runs list."""

    run_id: str
    agent: str
    status: RunStatus
    session_id: str
    correlation_id: str
    created_at: float
    updated_at: float
    seq: int
    turns: int
    usage: UsageOut
    cost_usd: float | None
    leased_by: str | None
    damaged: str | None = None
    """Why the run's log cannot be read (its other fields then come from the runs table
    alone); null for every sound run."""
    input_preview: str = ""
    """The start of the run's input (at most ``PREVIEW`` characters)."""
    output_preview: str | None = None
    """The start of its answer (its text, or its structured output's JSON), once completed."""
    error_code: str | None = None
    """The code of its last failure, cancellation or time-out."""
    waiting_s: float | None = None
    """Seconds it has waited on a person so far, while it waits on one."""
    waited_s: float | None = None
    """Seconds it waited on a person in all (every question, approval and unknown outcome),
    once it is finished; null before."""


class RunDetail(RunSummary):
    """A run with its outcome and what waits on a person."""

    input: str
    output: str | None
    data: Any = None
    """The structured output (JSON) of an agent with an ``output_type``; null for text."""
    stop_reason: str | None
    error: dict[str, Any] | None
    approvals: list[ApprovalOut]
    path: list[RunStatus]
    resume_refusal: str | None = None
    """Why resuming it cannot succeed now, in words; null when it can."""


class RunPage(BaseModel):
    """A page of runs; pass ``next_cursor`` as ``cursor`` for the next one (null: no more)."""

    runs: list[RunSummary]
    next_cursor: str | None


class EventOut(BaseModel):
    """One durable event of a run's log."""

    seq: int
    kind: str
    v: int
    at: float
    data: dict[str, Any]
    cost_usd: float | None = None


class MessageOut(BaseModel):
    """One message of the conversation as the model sees it."""

    role: str
    data: dict[str, Any]


class ToolOut(BaseModel):
    """A tool an agent may call."""

    name: str
    description: str
    effect_class: str
    parameters: dict[str, Any]
    requires_approval: bool


class AgentOut(BaseModel):
    """An agent this server knows (runs of other agents can be read, not created)."""

    name: str
    model: str
    tools: list[ToolOut]


class StatesOut(BaseModel):
    """The run state machine, from ``stead.core.states.TRANSITIONS``."""

    states: list[RunStatus]
    transitions: list[tuple[RunStatus, RunStatus]]
    finished: list[RunStatus]
    mermaid: str


class Problem(BaseModel):
    """One thing wrong with a request: where (``body``, ``query``, ``header``, then the
    field) and what; never the value sent."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorOut(BaseModel):
    """Every 4xx the API returns on purpose: the error's type and its message (and, for a
    request that does not fit its schema, each problem)."""

    error: str
    detail: str
    problems: list[Problem] | None = None


class Health(BaseModel):
    """Liveness: the process answers (no store access, no token needed)."""

    ok: bool
