"""``Runtime.send``: a follow-up message in a conversation, answered by a new run.

A run is one answer: ``completed`` is terminal, so a conversation is a sequence of runs, one
per user message, grouped by ``session_id`` (the conversation's id), each starting from the
whole conversation before it (``RunCreated.history``: what the run before it added, after
that run's own history, ``history_from``; see ``_history``). What keeps every run's
guarantees:

* **Recorded before anything else.** ``send`` first writes the message's row
  (``ConversationStore.record_message``: the conversation, a position the database hands
  out, the message id, the id of the run that will answer it, the text). From then on the
  message is durable: a crash after it loses nothing, and the next ``send`` to the
  conversation (or the same one again) answers it.
* **Ordered, never interleaved.** A message's run is created only once the message before it
  is answered, from that run's final conversation, so two messages sent at once (from any two
  processes) are answered one after the other, the second seeing the first and its answer.
  A sender whose message is second drives the first one's run itself if nobody does (it was
  created but its sender died) or waits for its driver. A message whose sender died before
  creating its run is taken up by the next ``send`` or by a worker's sweep
  (``take_up_messages``).
* **Idempotent by id.** A message sent again under its ``message_id`` finds its row, so it is
  answered by the same run, once: a retried ``send`` returns that run's answer.

The design follows the seed's conversation routing (inputs submitted under an id, each one
that arrives while a turn runs starting the next), on stead's own log and store.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from stead._crash import CrashHook
from stead.core.builders import created_event
from stead.core.fold import RunState
from stead.core.messages import UserMessage, message_from_json, message_to_json
from stead.core.states import FINISHED, RunStatus
from stead.errors import (
    Conflict,
    ConversationBusy,
    LeaseHeld,
    RunNotFound,
    UnknownAgent,
    UnknownConversation,
    UserError,
)
from stead.runtime.agent import (
    Agent,
    AttachmentInput,
    RunView,
    as_agent,
    chat_store,
    checks,
    history_of,
    resolve_run_id,
    store_attachments,
    with_loaded_from,
)
from stead.runtime.loop import OwnedRun, continued
from stead.store import ConversationEntry, ConversationStore, Store


class Conversations:
    """``Runtime.send`` and ``Runtime.conversation``."""

    store: Store
    agents: dict[str, Agent]
    clock: Callable[[], float]
    lease_ttl: float
    _crash: CrashHook

    if TYPE_CHECKING:

        async def run(self, run_id: str) -> RunView: ...

        def register(self, agent: Agent) -> None: ...

    async def send(
        self,
        conversation: str,
        text: str,
        *,
        message_id: str | None = None,
        agent: Agent | str | None = None,
        attachments: Iterable[AttachmentInput] = (),
    ) -> RunView:
        """Send a user message to a conversation and return the view of the run that
        answers it (driven here until it completes, fails or waits on a person).

        ``conversation`` is a conversation id, or the id of a run: a run answering a message
        of a conversation continues that conversation; a run started with ``start`` opens
        one (named by its ``session_id``, or by its own id) that it is the first message of.
        A new conversation needs ``agent``. ``message_id`` makes the send idempotent: the
        same id again returns the same run (answered once), whichever process retries.
        ``submit`` records the message the same way and leaves the answering to a worker.
        """
        chat, entry = await self._record(conversation, text, message_id, agent, attachments)
        return await self._answer(chat, entry)

    async def submit(
        self,
        conversation: str,
        text: str,
        *,
        message_id: str | None = None,
        agent: Agent | str | None = None,
        attachments: Iterable[AttachmentInput] = (),
    ) -> str:
        """Send a user message to a conversation without answering it in this process:
        record it, queue the run that answers it, and return that run's id at once; a worker
        (``stead worker``, ``stead serve --worker``) answers it, and ``wait(run_id)`` waits for
        the answer. The arguments are ``send``'s.

        The run is created now when the message before it is answered (or it is the first);
        otherwise it is created when that one finishes, by whichever process finishes it, or
        by ``wait``. Its id is fixed from the start, so the caller can wait on it already.
        """
        _, entry = await self._record(conversation, text, message_id, agent, attachments)
        await self._queue_next(entry.conversation_id)
        return entry.run_id

    async def _record(
        self,
        conversation: str,
        text: str,
        message_id: str | None,
        agent: Agent | str | None,
        attachments: Iterable[AttachmentInput],
    ) -> tuple[ConversationStore, ConversationEntry]:
        """Check a message and record it durably (``send``'s first step, and ``submit``'s)."""
        checks.identifier("conversation", conversation)
        checks.text("the message", text)
        if message_id is not None:
            checks.identifier("message_id", message_id)
        agent = as_agent(agent)
        if agent is not None and not isinstance(agent, Agent | str):
            raise UserError(f"agent takes an Agent or its name, not {type(agent).__name__}")
        chat = chat_store(self.store)
        conv, entries = await self._resolve(chat, conversation)
        name = agent.name if isinstance(agent, Agent) else agent
        if isinstance(agent, Agent):
            self.register(agent)
        if name is None:
            if not entries:
                raise UnknownConversation(
                    f"no conversation or run {conversation!r} in this store; to start one, "
                    f"pass the agent: rt.send({conversation!r}, text, agent=agent)"
                )
            name = entries[-1].agent
        if name not in self.agents:
            raise UnknownAgent(
                f"no agent named {name!r} is registered with this Runtime; pass agents=[...] "
                "to Runtime or agent=... to send"
            )
        refs = await store_attachments(self.store, attachments, self.clock())
        message = message_to_json(UserMessage(content=text, attachments=refs))
        mid = message_id or f"msg_{uuid.uuid4().hex}"
        entry, fresh = await chat.record_message(
            conv,
            message_id=mid,
            run_id=f"run_{uuid.uuid4().hex}",
            agent=name,
            input=message,
            now=self.clock(),
        )
        if not fresh and entry.input != message:
            raise UserError(
                f"message id {mid!r} was sent to conversation {conv!r} before with other "
                "content; a new message needs a new message_id"
            )
        self._crash("after_message_recorded", None)
        return chat, entry

    async def _queue_next(self, conversation: str) -> str | None:
        """Create the run of the conversation's first message that has none, if the message
        before it is answered (its run finished); the id of the run created, else None. Called
        after a message is submitted and after a conversation's run finishes, so messages
        submitted while one is being answered are answered next, in order, by any worker."""
        if not isinstance(self.store, ConversationStore):
            return None
        entries = await chat_store(self.store).conversation(conversation)
        first = len(entries)  # runs are created in order: look back from the newest
        while first > 0 and not await self._exists(entries[first - 1].run_id):
            first -= 1
        if first == len(entries):
            return None
        before = await self._state(entries[first - 1].run_id) if first > 0 else None
        if before is not None and before.status not in FINISHED:
            return None
        await self._create(entries[first], before)
        return entries[first].run_id

    async def _exists(self, run_id: str) -> bool:
        try:
            await self.store.get_run(run_id)
        except RunNotFound:
            return False
        return True

    async def take_up_messages(self, *, older_than: float = 30.0) -> list[str]:
        """Create the runs of messages whose sender died after recording them and before
        creating their run, recorded more than ``older_than`` seconds ago (a live sender is
        still on the younger ones); returns the ids of the runs created, which any worker
        then claims. The next ``send`` to such a conversation answers them too; a worker
        does this every ``approval_sweep`` seconds, so nobody has to send again. A message
        whose message before it is not answered yet waits for it (the next call takes it)."""
        checks.seconds("older_than", older_than, zero_ok=True)
        created, _ = await self._take_up(0.0, self.clock() - older_than)
        return created

    async def _take_up(
        self, since: float, until: float, limit: int = 100
    ) -> tuple[list[str], float]:
        """``take_up_messages`` for the messages recorded in ``[since, until)``; also the time
        a next sweep must start from: the oldest message left because the one before it is
        still being answered, else ``until``. One left behind a run that waits on a person
        does not hold the sweeps back (that may last days): the next ``send`` answers it, or
        ``take_up_messages`` once the person decided."""
        chat = chat_store(self.store)
        found = await chat.unanswered(since=since, until=until, limit=limit)
        created: list[str] = []
        left = found[-1].created_at if len(found) == limit else until
        for entry in found:
            before = None
            if entry.position > 0:
                earlier = (await chat.conversation(entry.conversation_id))[entry.position - 1]
                before = await self._state(earlier.run_id)
                if before is None or before.status not in FINISHED:
                    if before is None or before.status is not RunStatus.AWAITING_APPROVAL:
                        left = min(left, entry.created_at)
                    continue
            await self._create(entry, before)
            created.append(entry.run_id)
        return created, left

    async def conversation(self, conversation: str) -> list[ConversationEntry]:
        """The conversation's messages in order, each with the run that answers it."""
        checks.identifier("conversation", conversation)
        return await chat_store(self.store).conversation(conversation)

    async def message_of(self, run_id: str) -> ConversationEntry | None:
        """The conversation message ``run_id`` answers (its position, id and text), also
        while that run waits to be created; None for a run started on its own."""
        checks.identifier("run_id", run_id)
        if not isinstance(self.store, ConversationStore):
            return None
        chat = chat_store(self.store)
        entry = await chat.entry_of_run(run_id)
        if entry is not None:
            return entry
        try:  # the start of a created run's id (a run not created yet is named in whole)
            whole = await resolve_run_id(self.store, run_id)
        except RunNotFound:
            return None
        return None if whole == run_id else await chat.entry_of_run(whole)

    async def _resolve(
        self, chat: ConversationStore, given: str
    ) -> tuple[str, list[ConversationEntry]]:
        """The conversation ``given`` names and its messages so far."""
        entries = await chat.conversation(given)
        if entries:
            return given, entries
        answering = await chat.entry_of_run(given)
        if answering is not None:
            conv = answering.conversation_id
            return conv, await chat.conversation(conv)
        try:
            record = await self.store.get_run(given)
        except RunNotFound:
            return given, []
        # A run started on its own opens the conversation as its first message.
        conv = record.session_id or record.run_id
        entries = await chat.conversation(conv)
        if not entries:
            state, _ = await OwnedRun.load_state(self.store, record.run_id)
            first = message_to_json(UserMessage(content=state.input))
            await chat.record_message(
                conv,
                message_id=record.run_id,
                run_id=record.run_id,
                agent=record.agent,
                input=first,
                now=self.clock(),
            )
            entries = await chat.conversation(conv)
        return conv, entries

    async def _answer(self, chat: ConversationStore, entry: ConversationEntry) -> RunView:
        """Answer every message up to ``entry`` that is not answered yet, in order."""
        entries = (await chat.conversation(entry.conversation_id))[: entry.position + 1]
        first, before = entry.position, None
        while first > 0:  # back to the last message whose run has finished
            before = await self._state(entries[first - 1].run_id)
            if before is not None and before.status in FINISHED:
                break
            first, before = first - 1, None
        view: RunView | None = None
        for e in entries[first:]:
            if await self._state(e.run_id) is None:
                await self._create(e, before)
            view = await self._settle(e.run_id)
            if e.position < entry.position and view.status is RunStatus.AWAITING_APPROVAL:
                raise ConversationBusy(
                    f"message {entry.message_id!r} is recorded (position {entry.position} of "
                    f"conversation {entry.conversation_id!r}); run {e.run_id}, which answers "
                    "the message before it, waits on a person: decide it, then send again "
                    f"with message_id={entry.message_id!r} to have it answered"
                )
            before = await self._state(e.run_id)
        assert view is not None
        return view

    async def _state(self, run_id: str) -> RunState | None:
        try:
            state, _ = await OwnedRun.load_state(self.store, run_id)
        except RunNotFound:
            return None
        return state

    async def _create(self, entry: ConversationEntry, before: RunState | None) -> None:
        """The run answering ``entry``, from the conversation before it; another sender may
        have made it first (the same run id), which is as good."""
        message = message_from_json(entry.input)
        assert isinstance(message, UserMessage)
        whole = history_of(before.conversation()) if before is not None else ()
        history, history_from = await continued(
            self.store, before.run_id if before is not None else "", whole
        )
        event = created_event(
            entry.run_id,
            entry.agent,
            message.content,
            session_id=entry.conversation_id,
            correlation_id="",
            config=with_loaded_from(None, self.agents.get(entry.agent)),
            history=history,
            history_from=history_from,
            attachments=message.attachments,
        )
        with contextlib.suppress(Conflict):
            await self.store.create_run(event, now=self.clock())

    async def _settle(self, run_id: str) -> RunView:
        """Drive the run to rest here, or, while another driver holds it, wait for that."""
        while True:
            try:
                return await self.run(run_id)
            except LeaseHeld:
                record = await self.store.get_run(run_id)
                await self.store.wait_changed(run_id, record.last_seq, self._patience())

    def _patience(self) -> float:
        return max(0.05, min(1.0, self.lease_ttl / 3))
