"""Every exception stead raises, in one tree.

    SteadError
    ├── UserError                 a caller's mistake; the message says what to do
    │   ├── RunNotFound           no run with that id in this store
    │   ├── UnknownAgent          a run names an agent this process was not given
    │   ├── ApprovalError         no such pending approval, wrong token, second decision
    │   ├── AmbiguousId           an id's start that is too short or names several ids
    │   ├── ImportFileError       an export file this stead cannot import (names file, line)
    │   └── InvalidInput          a run's input or settings the log cannot hold (also an
    │                             InvalidEvent)
    ├── IllegalTransition         a run state change the state table does not allow (see
    │                             docs/design.md); nothing written
    ├── InvalidEvent              an event the log could not read back; refused, nothing written
    ├── ReplayDiverged            a resumed agent of another framework asked for other work
    │                             than its run's log recorded (names the turn and the call)
    ├── Conflict                  someone else wrote first (stale sequence, duplicate result)
    │   └── LeaseHeld             another live worker owns the run
    ├── Fenced                    this worker's lease was taken over; its writes are refused
    ├── WaitTimeout               ``Runtime.wait`` gave up before the run came to rest (also a
    │                             TimeoutError); nothing changed
    ├── ChildRunFailed            a child run a tool started (``ToolContext.run_child``) failed,
    │                             was cancelled or timed out (names the child and why)
    ├── ExecutorError             an executor settled an effect with an outcome that cannot be
    │                             read (names the key and the executor)
    ├── StoreError                the store failed or holds something it cannot read
    │   ├── CorruptEvent          one event row cannot be decoded (names run and sequence)
    │   └── SchemaTooNew          the store was migrated by a newer stead (names both versions)
    ├── DispatchRejected          an executor refused an assignment (names the executor and why)
    └── ProviderError             a model provider failed
        └── ProviderHTTPError     an HTTP status from the provider, with its stable code

    Aborted (BaseException)       cooperative cancellation unwinding a task (``RunCancelled``,
                                  its old name, is a deprecated alias)

The model's own mistakes (unknown tool, bad arguments) are never exceptions: they become
``is_error`` tool results the model reads on its next turn. Foreign exceptions (sqlite3,
SDK errors) are translated at the boundary into this tree so callers need catch only these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stead.core.messages import Usage


class SteadError(Exception):
    """Base of every error stead raises on purpose."""


class UserError(SteadError):
    """The caller used stead wrongly; the message says how to fix it."""


class RunNotFound(UserError):
    """No run with this id exists in the store."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run {run_id!r} not found; `stead runs list` shows the runs in this store"
        )
        self.run_id = run_id


class UnknownAgent(UserError):
    """A run was created by an agent this runtime was not given, so it cannot continue it."""


class UnknownConversation(UserError):
    """``Runtime.send`` to a conversation that has no message yet, without an agent."""


class ConversationBusy(UserError):
    """A message was recorded, but the one before it waits on a person: it is answered once
    that run is decided (``send`` it again under its ``message_id`` then)."""


class ApprovalError(UserError):
    """A decision that does not match a pending approval (wrong call, token, or already decided)."""


class AmbiguousId(UserError):
    """The start of an id that names no one id: too short to mean something (an empty one
    would name every run), or the start of several. ``candidates`` holds the ids it starts."""

    def __init__(self, message: str, candidates: list[str] | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)


class ImportFileError(UserError):
    """An export file that is not one this stead reads (malformed, cut short, from a newer
    format, an event its codec refuses): names the file and the line."""

    def __init__(self, name: str, line: int, why: str) -> None:
        super().__init__(f"{name}, line {line}: {why}")
        self.name = name
        self.line = line


class IllegalTransition(SteadError):
    """A state change the run state machine forbids. Nothing was written."""

    def __init__(self, current: str, target: str, event: str = "", detail: str = "") -> None:
        what = f" (event {event})" if event else ""
        why = detail or f"see stead.core.states.TRANSITIONS for what {current} allows"
        super().__init__(f"illegal transition {current} -> {target}{what}: {why}")
        self.current = current
        self.target = target
        self.event = event


class InvalidEvent(SteadError):
    """An event the store refused because it could not read it back as it is: a field of the
    wrong type, a negative count, text that is not valid Unicode, a value JSON cannot carry.

    The store checks every event with the same field rules its reader applies, before the
    commit, so what it accepted it can always read back. Nothing was written. ``kind`` and
    ``field`` name the event and the field (``field`` is dotted into nested values).
    """

    def __init__(self, kind: str, field: str, detail: str) -> None:
        super().__init__(f"{kind} event refused, nothing was written: field {field!r}: {detail}")
        self.kind = kind
        self.field = field
        self.detail = detail


class InvalidInput(InvalidEvent, UserError):
    """A run's input or settings (``Runtime.start``'s arguments) that the log cannot hold."""

    def __init__(self, kind: str, field: str, detail: str) -> None:
        InvalidEvent.__init__(self, kind, field, detail)
        if "not valid Unicode" in detail:
            hint = (
                "pass valid Unicode text (lone surrogates usually come from bytes decoded "
                "with errors='surrogateescape')"
            )
        else:
            hint = "pass " + _INPUT_HINTS.get(field, "plain JSON values")
        self.args = (f"cannot start the run: {field!r} {detail}; {hint}",)


_INPUT_HINTS = {
    "input": "the input as a str",
    "run_id": "a str run id (or none, to have one made)",
    "agent": "an Agent or the str name of one",
    "session_id": "a str session id",
    "correlation_id": "a str correlation id",
    "config": "a dict of plain JSON values (str keys, finite numbers, text, lists, dicts)",
}


class ReplayDiverged(SteadError):
    """An agent of another framework (``stead.pydantic_ai``), run again from the start to
    resume its run, asked for a step other than the one its log recorded: another tool, other
    arguments, a call the log never had, or an end where the log goes on. Its code changed
    since the run began; the recorded result is never handed to a different call. Finish the
    run with the code that started it, or start a new run."""

    def __init__(self, message: str, *, turn: int | None = None, call_id: str = "") -> None:
        super().__init__(message)
        self.turn = turn
        self.call_id = call_id


class Conflict(SteadError):
    """Another writer appended first, or a result for this call is already recorded."""


class LeaseHeld(Conflict):
    """Another live worker holds this run's lease."""


class Fenced(SteadError):
    """This worker's fencing epoch is stale: another owner took the run over."""


class WaitTimeout(SteadError, TimeoutError):
    """``Runtime.wait``'s timeout passed before the run came to rest; the message says where
    it is. Nothing changed: wait again to go on waiting."""


class ChildRunFailed(SteadError):
    """A child run a tool's handler started (``ToolContext.run_child``) failed, was
    cancelled or timed out: raised in the handler, which may catch it; uncaught, it is the
    call's error result, which the model reads. ``child_run`` names the child."""

    def __init__(self, child_run: str, message: str) -> None:
        super().__init__(message)
        self.child_run = child_run


class ExecutorError(SteadError):
    """An executor (a ``stead executor`` process, an ``HttpExecutor``'s far side) settled an
    effect with an outcome the runtime cannot read: a missing field, an unknown kind or
    failure code, a value of the wrong type. Names the effect's key and the executor. The
    step fails (counted like any step failure), and nothing is guessed about what happened."""

    def __init__(self, run_id: str, effect_id: str, executor: str, detail: str) -> None:
        super().__init__(
            f"executor {executor} settled effect {effect_id} of run {run_id!r} with an "
            f"outcome that cannot be read: {detail}"
        )
        self.run_id = run_id
        self.effect_id = effect_id
        self.executor = executor


class StoreError(SteadError):
    """The store failed, or holds data it cannot interpret."""


class CorruptEvent(StoreError):
    """An event row that cannot be decoded; names the run and sequence to inspect."""

    def __init__(self, run_id: str, seq: int, detail: str) -> None:
        super().__init__(f"corrupt event in run {run_id!r} at seq {seq}: {detail}")
        self.run_id = run_id
        self.seq = seq


class SchemaTooNew(StoreError):
    """The store's schema is newer than this stead knows: a newer stead migrated it, and rows
    this one wrote could break what that one expects. Nothing was read or written; upgrade
    stead where this ran. ``found`` and ``known`` are the two schema versions."""

    def __init__(self, where: str, found: int, known: int) -> None:
        super().__init__(
            f"the store {where} has schema version {found}, newer than the {known} this stead "
            "knows: a newer stead migrated it. Upgrade stead here (pip install -U stead) "
            "before using this store; nothing was read or written"
        )
        self.found = found
        self.known = known


class DispatchRejected(SteadError):
    """An executor refused an assignment for good (it cannot perform it as described: a
    digest that does not match, a tool it does not have); the message says which executor
    and why. ``retryable``: it may accept the same assignment later (it is full, starting)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ProviderError(SteadError):
    """A model provider call failed. ``code`` is one of stead.core.failures codes.

    ``usage`` is what the failed attempt consumed before it failed (a stream cut after the
    prompt was read still bills it), so budgets count every attempt.
    """

    def __init__(
        self, message: str, *, code: str = "executor_error", usage: Usage | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.usage = usage


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error status."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str,
        retry_after: float | None = None,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message, code=code, usage=usage)
        self.status = status
        self.retry_after = retry_after


class Aborted(BaseException):
    """Raised inside a task whose ``AbortSignal`` was aborted (its run cancelled, its lease
    lost), to unwind it cooperatively. Not the event ``stead.core.events.RunCancelled``, which
    records that a run ended cancelled."""


_DEPRECATED = {"RunCancelled": "Aborted"}
"""Old names still importable (with a ``DeprecationWarning``), and what they became."""


def __getattr__(name: str) -> object:
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    warnings.warn(
        f"stead.errors.{name} is now stead.errors.{new} (it clashed with the event "
        f"RunCancelled); the old name will be removed",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]


__all__ = [
    "Aborted",
    "AmbiguousId",
    "ApprovalError",
    "Conflict",
    "ConversationBusy",
    "CorruptEvent",
    "DispatchRejected",
    "ExecutorError",
    "Fenced",
    "IllegalTransition",
    "InvalidEvent",
    "InvalidInput",
    "LeaseHeld",
    "ProviderError",
    "ProviderHTTPError",
    "RunNotFound",
    "SchemaTooNew",
    "SteadError",
    "StoreError",
    "UnknownAgent",
    "UnknownConversation",
    "UserError",
    "WaitTimeout",
]
