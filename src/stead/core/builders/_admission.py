"""``CallAdmission``: the registry's and the policy's verdict on one requested call, in a
module of its own so the builders that take one (``_output``) need not import the package."""

from __future__ import annotations

from dataclasses import dataclass

from stead.core.codegen import fast_init
from stead.core.events import EffectClass


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CallAdmission:
    """Whether one requested call may run, as the registry and the tool's policy judge it
    before any intent is written (not a reconcile verdict: that says whether a call that ran
    took effect)."""

    tool_call_id: str
    arguments: str
    """Canonical JSON when valid; the raw text otherwise."""
    effect_class: EffectClass | None
    """The tool's class, None when unknown."""
    rejection: str | None
    """None when the call may run; otherwise the error the model will read."""
    needs_approval: bool = False
    """The tool's policy asks a person before this call runs."""
    output: bool = False
    """The agent's final-result call: the turn limits (which bound tools) do not refuse it."""
