"""What a caller sees of a run: ``RunView`` and its ``PendingApproval``s, projected from the
folded state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pydantic import TypeAdapter

from stead.core.children import link_of
from stead.core.fold import RunState
from stead.core.messages import Message, Usage
from stead.core.pricing import PRICES, PriceTable
from stead.core.states import RunStatus

if TYPE_CHECKING:
    from stead.runtime.agent._agent import Agent

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCost:
    """One turn's usage (its failed attempts included) and what it cost."""

    turn_index: int
    """The turn (-1: turns recorded before stead counted per turn, summed)."""
    model: str
    """The model its reply names ("" when unknown)."""
    usage: Usage
    cost_usd: float | None
    """Dollars by the price table; None when the table has no price for ``model``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A call waiting on a person."""

    tool_call_id: str
    tool: str
    reason: str
    """question (a question tool asks), policy (a call needs approval) or outcome_unknown (a
    person says whether the call happened)."""
    token: str
    """The single-use token a decision quotes."""
    payload: dict[str, Any]
    """What the person is shown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """What a caller sees of a run."""

    run_id: str
    agent: str
    status: RunStatus
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
    data: Any = None
    """The structured output of an agent with an ``output_type``, once completed: an
    instance of that type when this process has the agent (``Runtime(agents=[...])``), its
    JSON otherwise (``data_as`` types it anywhere). None for a text answer."""
    data_json: Any = None
    """The structured output as recorded on ``run_completed`` (plain JSON)."""
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
    parents: tuple[str, ...] = ()
    """For a child run (``stead.agent_tool``): its parent run first, then the parent's
    parent, up to the root (filled by ``Runtime.get``; its parent alone elsewhere)."""
    tree_usage: Usage | None = None
    """What this run and every run below it used (filled by ``Runtime.get`` for a run whose
    agent can start child runs, or whose tools' handlers started some); ``usage`` is the
    run's own."""

    @property
    def questions(self) -> tuple[PendingApproval, ...]:
        """The questions the run asks a person (question tools' calls; ``payload`` holds the
        question and its ``answer_schema``), answered with ``Runtime.answer``. ``approvals``
        holds them too, beside the calls that wait for an approval or for a person to say
        whether they happened."""
        return tuple(a for a in self.approvals if a.reason == "question")

    def data_as(self, output_type: type[T]) -> T:
        """The structured output as ``output_type`` (for ``mypy``: ``view.data_as(City)`` is a
        ``City``), validated from the recorded JSON; a ``ValueError`` if there is none."""
        if self.data_json is None:
            raise ValueError(f"run {self.run_id} has no structured output (status {self.status})")
        return TypeAdapter(output_type).validate_python(self.data_json)

    @classmethod
    def of(
        cls,
        state: RunState,
        agents: Mapping[str, Agent] | None = None,
        *,
        prices: PriceTable | None = None,
    ) -> RunView:
        """Project a folded state. The run's agent, when ``agents`` (by name) has it, types
        its structured output and prices its turns (its ``prices``); ``prices`` overrides
        the table (default ``stead.core.pricing.PRICES``)."""
        assert state.status is not None
        agent = agents.get(state.agent) if agents is not None else None
        output = agent.output if agent is not None else None
        data = state.data
        if output is not None and data is not None:
            data = output.load(data)
        table = prices or (agent.prices if agent is not None else None) or PRICES
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
        link = link_of(state.config) if state.config else None
        return cls(
            parents=() if link is None else (link.run_id,),
            data=data,
            data_json=state.data,
            conversation_id=state.session_id,
            messages=tuple(state.conversation()),
            turn_usage=turns,
            cost_usd=None if None in costs else sum(c for c in costs if c is not None),
            **{name: getattr(state, name) for name in _AS_IN_STATE},
            turns=state.turn_index + 1,
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


_AS_IN_STATE: Final = tuple(
    f.name
    for f in fields(RunView)
    if f.name in {g.name for g in fields(RunState)}
    and f.name not in ("approvals", "data", "messages", "turn_usage", "parents")
)
"""The fields of a view that are the folded state's own, by the same names (a view's
approvals are its own shape; its ``data`` is typed by the agent's output type; its
messages and turn usage are the state's, projected)."""
