"""What a caller sees of a run: ``RunView`` and its ``PendingApproval``s, projected from the
folded state."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Final

from stead.core.fold import RunState
from stead.core.messages import Usage
from stead.core.states import RunStatus


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

    @classmethod
    def of(cls, state: RunState) -> RunView:
        """Project a folded state."""
        assert state.status is not None
        return cls(
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
    if f.name in {g.name for g in fields(RunState)} and f.name != "approvals"
)
"""The fields of a view that are the folded state's own, by the same names (a view's
approvals are its own shape)."""
