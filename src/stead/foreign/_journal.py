"""Where an agent of another framework meets the run loop: one ``Journal`` per drive.

The foreign agent keeps its own loop; stead's run loop keeps the log. The two go in step:

* The foreign agent asks for a **model turn** (its ``k``-th request since it started): if the
  log has turn ``k``'s reply, the journal answers from it at once (replay); else it posts the
  request's body and waits until the log records turn ``k``. The run loop, asking its model
  (``ForeignModel``) for turn ``k``, takes the posted body, performs it and records the reply
  as any reply: budget checked first, usage counted, its tool calls written as intent.
* The foreign agent asks to run a **tool call**: the journal checks it against the log (the
  call id must be one the log recorded, for the same tool with the same arguments, else
  ``ReplayDiverged``); a recorded result is answered at once; else the body is posted and the
  journal waits for the log's result. The run loop, running the call as it runs any
  (``ForeignTool``: effect class, reconcile, approval, timeout), takes the posted body and
  performs it.

So the foreign agent only ever reads the log, and always reads the same thing, live or on
replay: what it gets back is the recorded reply and the recorded result, never the raw one.
Every decision about an effect (run it, replay it, reconcile it, ask a person) is the run
loop's, exactly as for a native agent. A body runs in the foreign agent's own context (its
context variables), in a task of the run loop's, so a cancel of the call cuts it.

On a new drive (a resume after a crash, a decision) the foreign agent starts again from the
beginning and replays up to where the log ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from stead.core.builders import EndRetry
from stead.core.events import (
    ApprovalDecided,
    AssistantMessageRecorded,
    Event,
    RunCreated,
    ToolCallRequested,
    ToolResultRecorded,
)
from stead.core.fold import RunState
from stead.core.messages import AssistantMessage, Message, Usage
from stead.errors import ReplayDiverged, UserError
from stead.runtime import DriveStart, Executor
from stead.runtime.agent import Ended
from stead.runtime.loop import hydrate
from stead.tools import ToolContext

log = logging.getLogger("stead.foreign")

T = TypeVar("T")

Launch = Callable[["Journal"], Awaitable[object]]
"""Runs the foreign agent once, from the start, for the journal's run (the integration's)."""

_JOURNAL: contextvars.ContextVar[Journal | None] = contextvars.ContextVar(
    "stead.foreign.journal", default=None
)
_TOOL_CONTEXT: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "stead.foreign.tool_context", default=None
)
_PROGRESS: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "stead.foreign.progress", default=None
)


def current_journal() -> Journal | None:
    """The journal of the drive (or of the foreign run) this task belongs to, if any."""
    return _JOURNAL.get()


def current_tool_context() -> ToolContext | None:
    """The ``ToolContext`` of the stead call whose body is running in this task, if any."""
    return _TOOL_CONTEXT.get()


def current_progress() -> Callable[[str], None] | None:
    """Where the text deltas of the model request running in this task go, if anywhere."""
    return _PROGRESS.get()


@dataclass(slots=True)
class _Posted(Generic[T]):
    body: Callable[[], Awaitable[T]]
    context: contextvars.Context
    """The foreign agent's context when it posted: the body runs in (a copy of) it."""
    retry: str = ""
    """For a model request: why the agent asks again after an answer it refused itself
    (its output check's message), if it does."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """The foreign agent refused a call's arguments itself (its own validation)."""

    message: str


class Journal:
    """One drive of one run of a foreign agent (see the module's docstring)."""

    def __init__(self, start: DriveStart, launch: Launch) -> None:
        self.session = start.owned
        self.run_id = start.owned.state.run_id
        self.deps = start.deps
        self.agent = start.agent
        self._launch = launch
        self._log = start.log
        self.turns: dict[int, AssistantMessageRecorded] = {}
        self.requested: dict[str, ToolCallRequested] = {}
        self.results: dict[str, ToolResultRecorded] = {}
        self.decided: dict[str, ApprovalDecided] = {}
        self.created: RunCreated | None = None
        self._learn(s.event for s in start.log)
        self._wake = asyncio.Event()
        self._model_posts: dict[int, _Posted[Any]] = {}
        self._tool_posts: dict[str, _Posted[Any]] = {}
        self._rejected: dict[str, Rejected] = {}
        self._asked = 0  # model requests the foreign agent made in this drive
        self._task: asyncio.Task[object] | None = None
        self._output: object = None  # what the agent's run gave, once it finished
        self._pending_end: AssistantMessageRecorded | None = None
        self._error: BaseException | None = None
        self._finished = False

    # -- the log --------------------------------------------------------------------------

    @property
    def state(self) -> RunState:
        return self.session.state

    def _learn(self, events: Iterable[Event]) -> None:
        for e in events:
            if type(e) is AssistantMessageRecorded:
                self.turns[e.turn_index] = e
            elif type(e) is ToolCallRequested:
                self.requested[e.tool_call_id] = e
            elif type(e) is ToolResultRecorded:
                self.results[e.tool_call_id] = e
            elif type(e) is ApprovalDecided:
                self.decided[e.tool_call_id] = e
            elif type(e) is RunCreated:
                self.created = e

    async def history(self) -> tuple[Message, ...]:
        """The conversation before the run's input (the messages of the runs before it in
        its conversation, ``Runtime.send``), read whole from the store."""
        whole = await hydrate(self.session.store, self._log[:1])
        first = whole[0].event if whole else None
        return first.history if isinstance(first, RunCreated) else ()

    @property
    def asked(self) -> int:
        """How many model requests the foreign agent made in this drive: the turn it asked
        for last is ``asked - 1``, the reply it acts on now."""
        return self._asked

    def committed(self, events: Sequence[Event]) -> None:
        self._learn(events)
        self._poke()

    def _poke(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    async def _until(self, look: Callable[[], T | None]) -> T:
        while True:
            wake = self._wake
            found = look()
            if found is not None:
                return found
            await wake.wait()

    # -- the foreign agent's side -----------------------------------------------------------

    async def model(
        self, body: Callable[[], Awaitable[Any]], *, retry: str = ""
    ) -> AssistantMessageRecorded:
        """The foreign agent's next model request: the recorded reply of its turn, after the
        run loop performed ``body`` (which returns a ``stead.providers.ModelResponse``) if the
        log did not have it yet. ``retry``: the agent asks again because its own check
        refused the answer before (``end_check``), saying why."""
        turn = self._asked
        self._asked += 1
        self._poke()  # a call of an earlier turn it never asked for is now known to be skipped
        recorded = self.turns.get(turn)
        if recorded is not None:
            return recorded
        self._model_posts[turn] = _Posted(body, contextvars.copy_context(), retry)
        self._poke()
        return await self._until(lambda: self.turns.get(turn) or self._ending(turn))

    def _ending(self, turn: int) -> AssistantMessageRecorded | None:
        pending = self._pending_end
        return pending if pending is not None and pending.turn_index == turn else None

    async def end_check(
        self, turn: int, message: Message, usage: Usage, model: str
    ) -> Ended | EndRetry:
        """The run loop's question before it records a reply that ends the run: the agent
        reads the reply as it will be recorded (in the same commit as this verdict) and
        either finishes (its output) or asks the model again (its check refused the answer).
        A crash before the commit loses both, and the model turn is made again."""
        assert isinstance(message, AssistantMessage)
        self._pending_end = AssistantMessageRecorded(
            turn_index=turn, message=message, usage=usage, model=model
        )
        self._poke()

        def look() -> Ended | EndRetry | None:
            if self._finished:
                if self._error is not None:
                    return EndRetry(f"{type(self._error).__name__}: {self._error}", last=True)
                return Ended(self._output)
            posted = self._model_posts.get(turn + 1)
            if posted is not None:
                return EndRetry(posted.retry or "the agent refused the answer; answer again")
            return None

        try:
            return await self._until(look)
        finally:
            self._pending_end = None

    async def tool(
        self,
        call_id: str,
        name: str,
        same_arguments: Callable[[str], bool],
        body: Callable[[], Awaitable[Any]],
    ) -> ToolResultRecorded:
        """The foreign agent runs call ``call_id`` of tool ``name``: its recorded result,
        after the run loop performed ``body`` (which returns a ``stead.core.effects``
        outcome) if the log had none. ``same_arguments`` is given the recorded arguments
        (canonical JSON) and says whether they are the ones the agent calls with now."""
        requested = self.requested.get(call_id)
        if requested is None:
            raise ReplayDiverged(
                f"run {self.run_id}: the agent called {name!r} under call id {call_id!r}, "
                "which its log never recorded; its code no longer makes the calls this run "
                "made (finish the run with the code that started it, or start a new run)",
                call_id=call_id,
            )
        turn = requested.turn_index
        if requested.name != name:
            raise ReplayDiverged(
                f"run {self.run_id}, turn {turn}, call {call_id}: the log recorded a call of "
                f"{requested.name!r}, the resumed agent calls {name!r}; its recorded result "
                "is not given to another tool",
                turn=turn,
                call_id=call_id,
            )
        decided = self.decided.get(call_id)
        recorded_arguments = (
            decided.arguments
            if decided is not None and decided.arguments is not None
            else requested.arguments
        )
        if not same_arguments(recorded_arguments):
            raise ReplayDiverged(
                f"run {self.run_id}, turn {turn}, call {call_id} of {name!r}: the log "
                f"recorded the arguments {recorded_arguments[:200]}, the resumed agent calls "
                "it with others; its recorded result is not given to another call",
                turn=turn,
                call_id=call_id,
            )
        result = self.results.get(call_id)
        if result is not None:
            return result
        self._tool_posts[call_id] = _Posted(body, contextvars.copy_context())
        self._poke()
        return await self._until(lambda: self.results.get(call_id))

    def rejected(self, call_id: str, message: str) -> None:
        """The foreign agent refused the arguments of ``call_id`` itself: the run loop
        records that as the call's (error) result instead of waiting for a body."""
        self._rejected[call_id] = Rejected(message)
        self._poke()

    async def decision(self, call_id: str) -> ApprovalDecided | ToolResultRecorded:
        """A call that waits on a person: the decision (approved; its run follows), or its
        result when it will not run (denied, or settled otherwise). A call the log does not
        say needs a person is a ``UserError``: nobody would ever be asked, and the run loop
        would wait for the call while the agent waits for the person."""
        requested = self.requested.get(call_id)
        unasked = requested is not None and not requested.requires_approval
        if requested is not None and unasked and call_id not in self.results:
            raise UserError(
                f"run {self.run_id}, call {call_id} of {requested.name!r}: the agent waits "
                "for a person's approval of this call, but the tool does not declare it; "
                "give the tool requires_approval=True so the run asks for it"
            )

        def look() -> ApprovalDecided | ToolResultRecorded | None:
            result = self.results.get(call_id)
            if result is not None:
                return result
            decided = self.decided.get(call_id)
            return decided if decided is not None and decided.decision == "approve" else None

        return await self._until(look)

    # -- the run loop's side ----------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._main())

    async def _main(self) -> None:
        _JOURNAL.set(self)
        try:
            self._output = await self._launch(self)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._error = exc
        finally:
            self._finished = True
            self._poke()

    def _gone(self, what: str, turn: int | None, call_id: str = "") -> None:
        """Raise what stops the foreign agent from ever posting ``what``, if anything."""
        if not self._finished:
            return
        if self._error is not None:
            # The agent's own failure (a divergence it found, or its framework giving up):
            # the step that waited for it fails with it, and the run loop records that.
            raise self._error
        raise ReplayDiverged(
            f"run {self.run_id}: the agent finished where its log has {what}; its code no "
            "longer makes the requests this run made",
            turn=turn,
            call_id=call_id,
        )

    async def perform_model(self, turn: int, on_progress: Callable[[str], None] | None) -> Any:
        """Turn ``turn``'s model request as the foreign agent makes it, performed here."""
        self._start()

        def look() -> _Posted[Any] | None:
            posted = self._model_posts.pop(turn, None)
            if posted is None:
                self._gone(f"model turn {turn} to make", turn)
                if self._asked > turn + 1:
                    raise ReplayDiverged(
                        f"run {self.run_id}: the log's model turn {turn} is not recorded, "
                        f"but the agent went on to turn {self._asked - 1}",
                        turn=turn,
                    )
            return posted

        posted = await self._until(look)
        return await _perform(posted, _PROGRESS, on_progress)

    async def perform_tool(self, ctx: ToolContext) -> Any:
        """Call ``ctx.tool_call_id`` as the foreign agent makes it, performed here: its
        outcome, or ``Rejected`` when the agent refused the arguments itself."""
        self._start()
        call_id = ctx.tool_call_id
        requested = self.requested.get(call_id)
        turn = requested.turn_index if requested is not None else None

        def look() -> _Posted[Any] | Rejected | None:
            posted = self._tool_posts.pop(call_id, None)
            if posted is not None:
                return posted
            rejected = self._rejected.pop(call_id, None)
            if rejected is not None:
                return rejected
            self._gone(f"call {call_id} to run", turn, call_id)
            if turn is not None and self._asked > turn + 1:
                raise ReplayDiverged(
                    f"run {self.run_id}, turn {turn}: the log has call {call_id} "
                    f"({ctx.tool_name}) to run, but the resumed agent went on to turn "
                    f"{self._asked - 1} without making it",
                    turn=turn,
                    call_id=call_id,
                )
            return None

        found: _Posted[Any] | Rejected = await self._until(look)
        if isinstance(found, Rejected):
            return found
        return await _perform(found, _TOOL_CONTEXT, ctx)

    def close(self) -> None:
        """The drive is over: the foreign agent stops where it waits (the log keeps all)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()


async def _perform(posted: _Posted[T], var: contextvars.ContextVar[Any], value: Any) -> T:
    """Run a posted body in a task of its own, in a copy of the foreign agent's context with
    ``var`` set to ``value``; a cancel of the caller cancels it (``await`` of a task does)."""

    async def body() -> T:
        var.set(value)
        return await posted.body()

    task = asyncio.get_running_loop().create_task(body(), context=posted.context.copy())
    return await task


class JournalWatch:
    """A drive's watch (``stead.runtime.DriveWatch``) holding its journal."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def notes(self) -> list[Event]:
        return []

    def executor(self, inner: Executor) -> Executor:
        return inner

    def committed(self, state: RunState, events: Sequence[Event]) -> None:
        self.journal.committed(events)

    def ended(self, state: RunState, error: BaseException | None) -> None:
        self.journal.close()


class JournalObserver:
    """The observer a foreign agent's ``stead.Agent`` carries (``Agent.observer``): every
    drive of its runs gets a journal, reachable from the drive's tasks."""

    def __init__(self, launch: Launch) -> None:
        self._launch = launch

    def begin(self, start: DriveStart) -> JournalWatch:
        journal = Journal(start, self._launch)
        # Set in the drive's own task (``observing`` is awaited in it), so the run loop's
        # model call and every tool task it starts afterwards find this drive's journal.
        _JOURNAL.set(journal)
        return JournalWatch(journal)


def drive_journal() -> Journal:
    """The journal of the drive this task belongs to; a ``UserError`` outside one."""
    journal = _JOURNAL.get()
    if journal is None:
        raise UserError(
            "a foreign agent's model or tool was called outside a stead drive; run the agent "
            "with stead.Runtime (rt.start, rt.run)"
        )
    return journal
