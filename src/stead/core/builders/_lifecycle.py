"""The events of a run's life after it is recorded: a fork's lineage, and the agent version
that drives a run (``stead.core.fork``, ``stead.core.versions`` decide; these build)."""

from __future__ import annotations

from stead.core.events import AgentChanged, AgentRecorded, RunForked
from stead.core.fold import RunState
from stead.core.fork import ForkPlan


def forked_event(source_run_id: str, at_turn: int, plan: ForkPlan) -> RunForked:
    """The lineage of a fork of ``source_run_id`` after turn ``at_turn``."""
    return RunForked(
        source_run_id=source_run_id,
        at_turn=at_turn,
        carried_results=plan.carried_results,
        dropped_calls=len(plan.dropped_calls),
    )


def version_event(state: RunState, fingerprint: str, label: str) -> AgentRecorded | AgentChanged:
    """The agent version ``fingerprint`` (labelled ``label``) takes the run: its first
    record, or a change from the one the run recorded."""
    if not state.agent_fingerprint:
        return AgentRecorded(fingerprint=fingerprint, version=label)
    return AgentChanged(
        from_fingerprint=state.agent_fingerprint,
        to_fingerprint=fingerprint,
        from_version=state.agent_version,
        to_version=label,
    )
