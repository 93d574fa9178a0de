"""What a caller sees of a run: ``RunView`` and its ``PendingApproval``s, projected from the
folded state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pydantic import TypeAdapter

from stead.core.fold import RunState
from stead.core.messages import Usage
from stead.core.states import RunStatus

if TYPE_CHECKING:
    from stead.runtime._agent import Agent

T = TypeVar("T")


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
    data: Any = None
    """The structured output of an agent with an ``output_type``, once completed: an
    instance of that type when this process has the agent (``Runtime(agents=[...])``), its
    JSON otherwise (``data_as`` types it anywhere). None for a text answer."""
    data_json: Any = None
    """The structured output as recorded on ``run_completed`` (plain JSON)."""

    def data_as(self, output_type: type[T]) -> T:
        """The structured output as ``output_type`` (for ``mypy``: ``view.data_as(City)`` is a
        ``City``), validated from the recorded JSON; a ``ValueError`` if there is none."""
        if self.data_json is None:
            raise ValueError(f"run {self.run_id} has no structured output (status {self.status})")
        return TypeAdapter(output_type).validate_python(self.data_json)

    @classmethod
    def of(cls, state: RunState, agents: Mapping[str, Agent] | None = None) -> RunView:
        """Project a folded state; ``agents`` (by name) type its structured output."""
        assert state.status is not None
        agent = agents.get(state.agent) if agents is not None else None
        output = agent.output if agent is not None else None
        data = state.data
        if output is not None and data is not None:
            data = output.load(data)
        return cls(
            data=data,
            data_json=state.data,
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
    if f.name in {g.name for g in fields(RunState)} and f.name not in ("approvals", "data")
)
"""The fields of a view that are the folded state's own, by the same names (a view's
approvals are its own shape; its ``data`` is typed by the agent's output type)."""
