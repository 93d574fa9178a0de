"""Typed request and response bodies of the HTTP API (the OpenAPI document is made of these).

Every string a caller sends is bounded and free of NUL characters (PostgreSQL refuses them
in text and JSON): a request that does not fit is a 422 naming the field, never a 500.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from stead.core.states import RunStatus


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Text = Annotated[str, Field(max_length=100_000), AfterValidator(_no_nul)]
Short = Annotated[str, Field(max_length=2_000), AfterValidator(_no_nul)]
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

    arguments: dict[str, Any] | None = None
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
    """Fork a run after one of its turns: its history through that turn, then ``input``."""

    at_turn: int = Field(ge=0)
    input: Text
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


class ErrorOut(BaseModel):
    """Every 4xx the API returns on purpose: the error's type and its message."""

    error: str
    detail: str


class Health(BaseModel):
    """Liveness: the process answers (no store access, no token needed)."""

    ok: bool
