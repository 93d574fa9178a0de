"""What a caller sees of a run: ``RunView`` and its ``PendingApproval``s, projected from the
folded state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stead.core.fold import RunState
from stead.core.messages import Message, Usage
from stead.core.pricing import PRICES, PriceTable
from stead.core.states import RunStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCost:
    """One turn's usage (its failed attempts included) and what it cost."""

    turn_index: int
    """The turn (-1: turns recorded before stead counted per turn, summed)."""
    model: str
    """The model its reply names ("" when unknown)."""
    usage: Usage
    """Its tokens."""
    cost_usd: float | None
    """Dollars by the price table; None when the table has no price for ``model``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A call waiting on a person."""

    tool_call_id: str
    """The call."""
    tool: str
    """Its tool."""
    reason: str
    """outcome_unknown or policy."""
    token: str
    """The single-use token a decision quotes."""
    payload: dict[str, Any]
    """What the person is shown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """What a caller sees of a run."""

    run_id: str
    """Run id."""
    agent: str
    """Agent name."""
    status: RunStatus
    """Current status."""
    output: str | None
    """Final answer, once completed."""
    stop_reason: str | None
    """Why it completed."""
    error: dict[str, Any] | None
    """Last failure, cancellation or timeout."""
    usage: Usage
    """Aggregated usage."""
    turns: int
    """Turns started."""
    seq: int
    """Events in the log."""
    approvals: tuple[PendingApproval, ...] = field(default=())
    """Pending approvals."""
    conversation_id: str = ""
    """The conversation the run answers a message of (its ``session_id``)."""
    messages: tuple[Message, ...] = ()
    """The whole conversation the model saw, in order: the history the run started from,
    the input, and every reply and tool result since."""
    turn_usage: tuple[TurnCost, ...] = ()
    """Usage and cost per turn."""
    cost_usd: float | None = None
    """What the run cost in dollars (every attempt priced by the model that answered its
    turn); None when a turn that used tokens has no known price."""

    @classmethod
    def of(cls, state: RunState, prices: PriceTable | None = None) -> RunView:
        """Project a folded state; ``prices`` (default ``stead.core.pricing.PRICES``) for
        the costs."""
        assert state.status is not None
        table = prices or PRICES
        # A turn whose every attempt failed names no model: its tokens are priced by the
        # model the run used last (the agent's), else unknown.
        known = next((t.model for t in reversed(state.turn_usage) if t.model), "")
        turns = tuple(
            TurnCost(
                turn_index=t.turn_index,
                model=t.model,
                usage=t.usage,
                cost_usd=table.cost(t.usage, t.model or known) if t.usage.total_tokens else 0.0,
            )
            for t in state.turn_usage
        )
        costs = [t.cost_usd for t in turns]
        return cls(
            conversation_id=state.session_id,
            messages=tuple(state.conversation()),
            turn_usage=turns,
            cost_usd=None if None in costs else sum(c for c in costs if c is not None),
            run_id=state.run_id,
            agent=state.agent,
            status=state.status,
            output=state.output,
            stop_reason=state.stop_reason,
            error=state.error,
            usage=state.usage,
            turns=state.turn_index + 1,
            seq=state.seq,
            approvals=tuple(
                PendingApproval(
                    tool_call_id=a.tool_call_id,
                    tool=state.calls[a.tool_call_id].name,
                    reason=a.reason,
                    token=a.token,
                    payload=dict(a.payload or {}),
                )
                for a in state.approvals.values()
            ),
        )


def view_of(state: RunState, agents: Mapping[str, Any]) -> RunView:
    """``RunView.of`` priced by the table of the run's agent when ``agents`` has it (an
    ``Agent``'s ``prices``), else by the default table."""
    agent = agents.get(state.agent)
    return RunView.of(state, getattr(agent, "prices", None))
