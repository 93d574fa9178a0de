"""Recovery at a takeover: what becomes of every effect a dead owner left in flight.

When a run changes owner, some of its effects may have intent in the log and no recorded
outcome: the turn's model call, or tool calls. For each one the new owner compares three
sources (the run's log, what the executor holds for its key, and the key's redispatches)
and decides, here, in pure code; ``stead.runtime.loop._reconcile`` does what is decided
(abort, recover, dispatch, append) and feeds the executor's answers back in.

The verdict table (``decide``; ``VERDICTS`` below is the same table as data):

* active -> keep: wait for its outcome.
* terminal -> keep: record the outcome it settled with.
* orphaned (held by an executor whose lease lapsed) -> defer: ask the pool, once per
  deferral, to recover it, and wait. Never disposed on sight. A deferral is bounded: after
  ``max_deferrals`` deferrals of one key (over every takeover) it counts as missing; as its
  key is accepted and cannot be aborted, it is cancelled, then disposed.
* aborted -> dispose (the key is closed already).
* missing -> dispose (abort first), unless the policy says ``redispatch`` explicitly: then it
  is handed over again within ``max_redispatches`` per key. An executor whose ``missing``
  proves nothing (the in-process one forgets what a dead process ran) never gets a
  non_idempotent call redispatched: that call is disposed instead.

Disposal aborts the key first; an abort that finds the key accepted (a dispatch won the race)
turns the verdict into keep (``after_abort``). The ``dispose`` verdict is the disposal (its
handler does it, so a recovery is one record, and no progress that would hide a step failing
in every owner): the model call's attempt is spent and the turn planned again under a new key
(the old one is tombstoned); a tool call is settled ``effect_unknown`` at its attempt, and its
effect class decides as after any crash (``stead.core.decide.plan_call``): read_only reruns,
idempotent_write reruns with the same idempotency key, non_idempotent asks its reconcile
function or a person.

A key's redispatches are three records, appended to the run's own log (so fenced by
the owner's epoch like every append): ``planned{attempt}`` before the dispatch,
``dispatched{attempt}`` once it is accepted, ``given_up{reason}``. An attempt planned and not
dispatched is owed: it is offered again, under the same number, before any new one is
planned, so a crash between the two records spends no slot of the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Final, Literal, TypeAlias, get_args

from stead.core.canonical import effect_id
from stead.core.codegen import compile_copy
from stead.core.events import (
    EffectClass,
    EffectReconciled,
    Event,
    RedispatchRecorded,
)
from stead.core.fold import RunState
from stead.core.ledger import Attachment
from stead.core.states import FINISHED, RunStatus
from stead.errors import UserError

ATTACHMENTS: Final[tuple[Attachment, ...]] = get_args(Attachment)
"""Every answer an executor's ``attach`` may give."""

Verdict: TypeAlias = Literal["keep", "defer", "dispose", "redispatch"]
Action: TypeAlias = Literal[
    "wait", "recover", "retry", "abort", "dispose", "cancel", "plan", "offer", "follow", "give_up"
]
"""What the runtime does with a decision:

* ``wait`` (keep): await the key's outcome and record it.
* ``recover`` (defer): ask the pool to recover the key, wait up to ``defer_wait``, look again.
* ``retry`` (defer): a dispatch whose answer was lost: wait, then look again.
* ``abort`` (dispose): abort the key, then ``after_abort``.
* ``dispose`` (dispose): the key is closed already; record the disposal.
* ``cancel`` (dispose): an orphan past its bound: cancel the key, then record the disposal.
* ``plan`` / ``offer`` (redispatch): record ``planned{attempt}`` (plan only), dispatch, then
  ``after_dispatch``.
* ``follow`` (redispatch): accepted again: await its outcome as ``wait`` does.
* ``give_up`` (dispose): record ``given_up``, then abort as ``abort`` does.
"""

DispatchAnswer: TypeAlias = Literal["accepted", "refused", "rejected", "lost"]
"""How a redispatch went: accepted (or held already), refused (the key is aborted), rejected
(the executor refused the assignment for good: it would refuse every attempt), or no answer
(a transport error, a timeout, a refusal it may take back, an error nobody classified: the
attempt stays owed)."""

VERDICTS: Final[dict[Action, Verdict]] = {
    "wait": "keep",
    "recover": "defer",
    "retry": "defer",
    "abort": "dispose",
    "dispose": "dispose",
    "cancel": "dispose",
    "plan": "redispatch",
    "offer": "redispatch",
    "follow": "redispatch",
    "give_up": "dispose",
}
"""Each action belongs to exactly one verdict."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryPolicy:
    """How a takeover treats the effects it finds (``Runtime(recovery=...)``)."""

    missing: Literal["dispose", "redispatch"] = "dispose"
    """What to do with an effect the executor holds nothing for. Redispatch must be asked for:
    no executor's presence chooses it."""
    max_redispatches: int = 3
    """Redispatches per key, over every takeover; then it is disposed."""
    max_deferrals: int = 3
    """Deferrals per key (orphaned, or a dispatch answer lost), over every takeover; the next
    look counts it as missing."""
    defer_wait: float = 30.0
    """Seconds a takeover waits on a deferred key before it looks again."""

    def __post_init__(self) -> None:
        if self.missing not in ("dispose", "redispatch"):
            raise UserError(
                f"RecoveryPolicy.missing is 'dispose' or 'redispatch', not {self.missing!r}"
            )
        for name in ("max_redispatches", "max_deferrals"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserError(f"RecoveryPolicy.{name} is a count (0 or more), not {value!r}")
        wait = self.defer_wait
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 < wait < 1e9:
            raise UserError(f"RecoveryPolicy.defer_wait is seconds above 0, not {wait!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One effect with intent and no recorded outcome, and the key it was dispatched under."""

    turn_index: int
    tool_call_id: str
    """Its call; "" for the turn's model call."""
    attempt: int
    """The attempt its key names."""
    effect_id: str
    """The key (``stead.core.canonical.effect_id``), as the run loop derives it."""
    effect_class: EffectClass | None
    """The tool's class; None for the model call."""

    @property
    def kind(self) -> Literal["model", "tool"]:
        """``model`` or ``tool``."""
        return "tool" if self.tool_call_id else "model"


def targets(state: RunState) -> list[Target]:
    """The effects of ``state`` that may be in flight, model call first, then the calls in
    the model's order. A call that cannot have been dispatched is not one: refused, waiting on
    a person (consent, or an approval), or non_idempotent and not started (its start record is
    written before its dispatch), or already declared unknown or reconciled."""
    if state.status is None or state.status in FINISHED:
        return []
    out: list[Target] = []
    turn = state.turn_index
    if state.status is RunStatus.RUNNING and turn >= 0 and not state.turn_has_reply:
        n = state.model_failures + 1
        out.append(_target(state, turn, "", n, None))
    for call in state.pending_calls():
        cls = call.effect_class
        if cls is None or call.rejection is not None or call.tool_call_id in state.approvals:
            continue
        if cls == "non_idempotent":
            settled = call.unknown or call.reconciled is not None or call.decision is not None
            if call.in_flight and not settled:
                out.append(_target(state, turn, call.tool_call_id, call.attempts, cls))
            continue
        if call.requires_approval and call.decision is None and not call.in_flight:
            continue  # asks for consent before its first run: never dispatched
        # No start record for these classes: the attempt in flight is the next one.
        out.append(_target(state, turn, call.tool_call_id, call.attempts + 1, cls))
    return out


def _target(state: RunState, turn: int, call: str, attempt: int, cls: EffectClass | None) -> Target:
    key = effect_id(state.run_id, turn, call or "model", attempt)
    return Target(
        turn_index=turn, tool_call_id=call, attempt=attempt, effect_id=key, effect_class=cls
    )


# -- a key's redispatches ----------------------------------------------------------------------


class RedispatchConflict(ValueError):
    """A redispatch record the key's redispatches cannot take where they stand; folding a
    log, it names where the record is (``Memory.see``)."""

    def __init__(
        self, detail: str, *, position: int | None = None, index: int | None = None
    ) -> None:
        super().__init__(detail)
        self.position = position
        """The record's sequence number in the run's log, when the fold was given it."""
        self.index = index
        """The record's index among the events folded (from 0)."""


@dataclass(frozen=True, slots=True)
class Redispatches:
    """The fold of one key's redispatch records."""

    planned: int = 0
    """Redispatches decided."""
    dispatched: int = 0
    """Redispatches the executor accepted: ``planned`` or one less."""
    given_up: bool = False
    """No more redispatches."""
    reason: str = ""
    """Why it was given up."""

    @property
    def owed(self) -> int:
        """The attempt planned and never dispatched (offered again first), else 0."""
        return self.planned if self.planned > self.dispatched else 0


def redispatch_step(r: Redispatches, e: RedispatchRecorded) -> Redispatches:
    """``r`` after ``e``, or ``RedispatchConflict``: nothing after given_up; an attempt is
    planned only when none is owed, as the next number; dispatched only the one owed."""
    if r.given_up:
        raise RedispatchConflict(f"{e.step} after given_up")
    if e.step == "given_up":
        return replace(r, given_up=True, reason=e.reason)
    if e.step == "planned":
        if r.owed:
            raise RedispatchConflict(f"attempt {e.attempt} planned while {r.owed} is owed")
        if e.attempt != r.planned + 1:
            raise RedispatchConflict(f"attempt {e.attempt} planned after {r.planned}")
        return replace(r, planned=e.attempt)
    if not r.owed or e.attempt != r.owed:
        raise RedispatchConflict(
            f"attempt {e.attempt} dispatched with {r.planned} planned, {r.dispatched} dispatched"
        )
    return replace(r, dispatched=e.attempt)


@dataclass(slots=True)
class Memory:
    """What earlier takeovers left in the log, per key: redispatches and deferral counts."""

    redispatches: dict[str, Redispatches] = field(default_factory=dict)
    """Redispatches by effect id."""
    deferrals: dict[str, int] = field(default_factory=dict)
    """Defer verdicts by effect id."""
    seen: int = 0
    """Events taken into account so far (the next one's index)."""

    def redispatches_of(self, key: str) -> Redispatches:
        """The key's redispatches (none if it has none)."""
        return self.redispatches.get(key, Redispatches())

    def see(self, e: Event, position: int | None = None) -> None:
        """Take one event of the log into account; ``position``: its sequence number in the
        log, when known. ``RedispatchConflict`` for a bad record, naming the effect, the
        record's index among the events seen and its log position: a damaged log is found
        by where it is damaged."""
        index = self.seen
        self.seen += 1
        if isinstance(e, RedispatchRecorded):
            try:
                self.redispatches[e.effect_id] = redispatch_step(
                    self.redispatches_of(e.effect_id), e
                )
            except RedispatchConflict as exc:
                where = f"log position {position}, " if position is not None else ""
                raise RedispatchConflict(
                    f"the redispatches of effect {e.effect_id} cannot take its record "
                    f"at {where}event index {index}: {exc}",
                    position=position,
                    index=index,
                ) from exc
        elif isinstance(e, EffectReconciled) and e.verdict == "defer":
            self.deferrals[e.effect_id] = self.deferrals.get(e.effect_id, 0) + 1


def remember(events: Iterable[Event], positions: Iterable[int] | None = None) -> Memory:
    """Fold a run's log into its recovery memory; ``positions``: each event's sequence
    number in the log (named by a conflict)."""
    memory = Memory()
    if positions is None:
        for e in events:
            memory.see(e)
    else:
        for e, position in zip(events, positions, strict=True):
            memory.see(e, position)
    return memory


# -- deciding --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One target's verdict and what to do about it."""

    target: Target
    """The effect."""
    observed: Attachment
    """What its executor answered last."""
    action: Action
    """What the runtime does next (``Action``)."""
    reason: str
    """Why, for the timeline."""
    attempt: int = 0
    """The redispatch to plan or offer, else 0."""

    @property
    def verdict(self) -> Verdict:
        """The verdict its action belongs to."""
        return VERDICTS[self.action]


def decide(
    target: Target,
    observed: Attachment,
    policy: RecoveryPolicy,
    *,
    redispatches: Redispatches = Redispatches(),
    deferrals: int = 0,
    authoritative: bool = False,
) -> Decision:
    """The verdict on ``target`` given what its executor holds (``observed``), its redispatches
    and how often it was deferred. ``authoritative``: the executor's ``missing`` proves the key
    never ran (a durable ledger says so; the in-process executor cannot)."""

    def d(action: Action, why: str, attempt: int = 0) -> Decision:
        return Decision(
            target=target, observed=observed, action=action, reason=why, attempt=attempt
        )

    if observed not in ATTACHMENTS:
        raise ValueError(f"unknown attachment {observed!r}")
    if observed == "active":
        return d("wait", "its executor is running it")
    if observed == "terminal":
        return d("wait", "it settled: its outcome is recorded")
    if observed == "orphaned":
        if deferrals < policy.max_deferrals:
            return d("recover", f"orphaned: the pool is asked to recover it ({deferrals + 1})")
        return d("cancel", f"orphaned after {deferrals} deferrals: counts as missing")
    if observed == "aborted":
        return d("dispose", "its key is aborted")
    if policy.missing == "dispose":
        return d("abort", "its executor holds nothing for it")
    if redispatches.given_up:
        return d("abort", f"redispatch was given up: {redispatches.reason}")
    if target.effect_class == "non_idempotent" and not authoritative:
        return d("abort", "missing here does not prove it never ran: not redispatched")
    if redispatches.owed:
        if deferrals >= policy.max_deferrals:
            why = f"the dispatch of redispatch {redispatches.owed} was lost {deferrals} times"
            return d("give_up", why)
        return d(
            "offer",
            f"redispatch {redispatches.owed} was planned, never accepted",
            redispatches.owed,
        )
    if redispatches.planned >= policy.max_redispatches:
        return d("give_up", f"the redispatch budget of {policy.max_redispatches} is spent")
    n = redispatches.planned + 1
    return d("plan", f"missing: redispatch {n} of {policy.max_redispatches}", n)


def after_abort(decision: Decision, aborted: bool) -> Decision:
    """A disposal once its key's abort answered: closed (dispose), or an acceptance had won
    the race (keep: its outcome is awaited like any kept effect's)."""
    if aborted:
        return replace(decision, action="dispose", observed="aborted")
    return replace(
        decision,
        action="wait",
        observed="active",
        reason="an acceptance won the race with the abort: kept",
    )


def after_dispatch(decision: Decision, answer: DispatchAnswer, why: str = "") -> Decision:
    """A redispatch once its dispatch answered: accepted (await it), refused (its key is
    aborted: given up), rejected (given up at once, ``why`` the executor's own words: every
    attempt would meet the same refusal), or lost (deferred: the attempt stays owed, offered
    again later)."""
    n = decision.attempt
    if answer == "accepted":
        return replace(decision, action="follow", reason=f"redispatch {n} accepted")
    if answer == "refused":
        return replace(decision, action="give_up", reason=f"redispatch {n} refused: key aborted")
    if answer == "rejected":
        return replace(decision, action="give_up", reason=why or f"redispatch {n} rejected")
    return replace(decision, action="retry", reason=f"no answer to redispatch {n}: owed")


# -- what is recorded --------------------------------------------------------------------------


def verdict_event(decision: Decision, epoch: int) -> EffectReconciled:
    """The timeline's line for a decision; for a disposal, the disposal itself (its handler
    spends the model call's attempt, or settles the tool call effect_unknown)."""
    d = decision
    return _VERDICT(d.target, observed=d.observed, verdict=d.verdict, reason=d.reason, epoch=epoch)


_VERDICT: Final[Callable[..., EffectReconciled]] = compile_copy(
    Target, EffectReconciled, "observed", "verdict", "reason", "epoch"
)
"""The verdict's event with its target's key fields (turn, call, attempt, effect id)."""


def redispatch_event(
    decision: Decision, step: Literal["planned", "dispatched", "given_up"], epoch: int
) -> RedispatchRecorded:
    """The redispatch record ``step`` of a decision (``given_up`` carries its reason)."""
    given_up = step == "given_up"
    return RedispatchRecorded(
        effect_id=decision.target.effect_id,
        step=step,
        attempt=0 if given_up else decision.attempt,
        reason=decision.reason if given_up else "",
        epoch=epoch,
    )
