"""A conversation stores each message once, and a message its sender left behind is taken up.

* Each run of a conversation records only what the run before it added (its
  ``run_created`` names that run: ``history_from``), so ``n`` messages store ``O(n)``, not the
  whole history again in every run; every reader (a fresh process, ``Runtime.events``, the
  model's request) still sees the whole history, exactly the one the run started with.
* A sender SIGKILLed after recording its message and before creating its run leaves the
  message for a worker, which creates and answers it without anyone sending again.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
import test_conversations
from _crash_harness import KILLED
from chat_child import agent as child_agent
from chat_child import echo

import stead
from _wait import until_async
from stead.core.events import RunCreated
from stead.core.messages import AssistantMessage, UserMessage
from stead.core.states import RunStatus
from stead.errors import StoreError
from stead.runtime import Worker
from stead.runtime.loop._owned import OwnedRun
from stead.testing import Reply, ScriptedModel, assert_valid_history

CHILD = test_conversations.CHILD
url = test_conversations.url
"""The SQLite and PostgreSQL store of each test (the conversation tests' fixture)."""


async def _created(rt: stead.Runtime, run_id: str) -> RunCreated:
    """The ``run_created`` as the store holds it (``Runtime.events`` resolves the history)."""
    first = (await rt.store.read_events(run_id))[0].event
    assert isinstance(first, RunCreated)
    return first


async def test_each_message_is_stored_once_and_every_reader_sees_the_whole_history(
    url: str,
) -> None:
    agent = stead.Agent("chat", ScriptedModel([echo] * 64))
    async with stead.Runtime(url, agents=[agent]) as rt:
        views = [await rt.send("c", "message 0", agent=agent)]
        for i in range(1, 12):
            views.append(await rt.send("c", f"message {i}"))
        assert views[-1].output == "answer to 'message 11' after 11 messages, 11 answers"
        for before, view in itertools.pairwise(views):
            stored = await _created(rt, view.run_id)
            if before is views[0]:  # the first run has no history: the second holds it whole
                assert stored.history_from == "" and len(stored.history) == 2
            else:  # only what the run before added: its user message and its answer
                assert stored.history_from == before.run_id
                assert stored.history == (
                    UserMessage(content=(await _created(rt, before.run_id)).input),
                    AssistantMessage(text=before.output or ""),
                )
        last = views[-1]
        # the log as a reader gets it: the whole history, as logs before history_from held it
        whole = (await rt.events(last.run_id))[0].event
        assert isinstance(whole, RunCreated) and whole.history_from == ""
        assert len(whole.history) == 22 and whole.history == last.messages[:-2]
    # a process with nothing cached reads the chain back to the same conversation
    async with stead.Runtime(url, agents=[agent]) as fresh:
        view = await fresh.get(last.run_id)
        assert view.messages == last.messages
        assert await OwnedRun.verify(fresh.store, last.run_id) > 0
        again = await fresh.send("c", "message 12")
        assert again.output == "answer to 'message 12' after 12 messages, 12 answers"


def _bytes_of_run_created(path: Path) -> list[int]:
    import sqlite3

    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT LENGTH(data) FROM events WHERE kind = 'run_created' ORDER BY created_at"
        ).fetchall()
    return [int(r[0]) for r in rows]


async def test_a_runs_record_does_not_grow_with_the_conversation(tmp_path: Path) -> None:
    """The bytes of the 30th message's ``run_created`` are those of the 3rd (give or take the
    digits of a longer message): linear in the conversation, not quadratic."""
    agent = stead.Agent("chat", ScriptedModel([echo] * 64))
    path = tmp_path / "chat.db"
    async with stead.Runtime(f"sqlite:///{path}", agents=[agent]) as rt:
        for i in range(30):
            await rt.send("c", f"message {i}", agent=agent)
    sizes = _bytes_of_run_created(path)
    assert len(sizes) == 30
    assert sizes[-1] < sizes[2] + 64, sizes


async def test_a_follow_up_keeps_its_history_when_the_run_before_is_resumed(url: str) -> None:
    """The run before a follow-up was cancelled while it waited on a person; the follow-up
    starts from the conversation with that unanswered question cut. Resuming the cancelled
    run later adds to its messages, not to the follow-up's history."""
    model = ScriptedModel(
        [
            Reply(tool_calls=[("ask_user", {"question": "Which colour?"})]),
            "Noted: no colour yet.",  # whichever run asks next, with one answer before it
            "Painting it blue.",
        ]
    )
    agent = stead.Agent("paint", model, [stead.question_tool(Literal["red", "blue"])])
    async with stead.Runtime(url, agents=[agent]) as rt:
        first = await rt.send("c", "Paint my fence", agent=agent)
        assert first.status is RunStatus.AWAITING_APPROVAL
        await rt.cancel(first.run_id, "the customer left")
        second = await rt.send("c", "Any news?")
        assert second.output == "Noted: no colour yet."
        started_with = second.messages
        assert [m.role for m in started_with] == ["user", "assistant", "tool", "user", "assistant"]
        before = len((await rt.get(first.run_id)).messages)
        await rt.resume(first.run_id)  # requeued and driven on: its messages grow
        assert len((await rt.get(first.run_id)).messages) > before
    async with stead.Runtime(url, agents=[agent]) as fresh:
        later = await fresh.get(second.run_id)
        assert later.messages == started_with
        assert_valid_history(await fresh.state(second.run_id))


async def test_a_history_whose_run_before_is_gone_is_a_store_error_that_says_so(
    tmp_path: Path,
) -> None:
    agent = stead.Agent("chat", ScriptedModel([echo] * 4))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'c.db'}", agents=[agent]) as rt:
        event = RunCreated(
            run_id="run_after", agent="chat", input="hi", history_from="run_gone", session_id="c"
        )
        await rt.store.create_run(event, now=0.0)
        with pytest.raises(StoreError, match="run_gone"):
            await rt.get("run_after")


def test_a_message_whose_sender_died_before_its_run_was_created_is_answered_by_a_worker(
    url: str,
) -> None:
    """The second sender is SIGKILLed after recording its message, before creating its run;
    nobody sends again: a worker creates the run (from the conversation before it) and
    answers it, once."""
    first = subprocess.run(
        [sys.executable, str(CHILD), url, "conv", "first", "m1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    killed = subprocess.run(
        [sys.executable, str(CHILD), url, "conv", "second", "m2"],
        env={**__import__("os").environ, "STEAD_CRASH_AT": "after_message_recorded"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == KILLED, killed.stderr

    async def take_up() -> None:
        worker = Worker(url, [child_agent], lease_ttl=0.2, poll_interval=0.05, approval_sweep=0.05)
        serving = asyncio.create_task(worker.run())
        try:
            async with stead.Runtime(url, agents=[child_agent]) as rt:
                (_, orphan) = await rt.conversation("conv")

                async def completed() -> stead.RunView | None:
                    try:
                        view = await rt.get(orphan.run_id)
                    except stead.RunNotFound:
                        return None
                    return view if view.status is RunStatus.COMPLETED else None

                view = await until_async(completed, "a worker to take the message up", timeout=20)
                assert view.output == "answer to 'second' after 1 messages, 1 answers"
                assert worker.stats["messages_taken_up"] == 1
                assert_valid_history(await rt.state(orphan.run_id))
        finally:
            worker.stop()
            await serving
            await worker.close()

    asyncio.run(take_up())


async def test_a_conversation_written_with_whole_histories_loads_and_continues(
    tmp_path: Path,
) -> None:
    """Logs written before ``history_from`` hold each run's whole history inline: they load
    as they are, and the next message continues them, storing only what is new."""
    agent = stead.Agent("chat", ScriptedModel([echo] * 8))
    earlier: tuple[UserMessage | AssistantMessage, ...] = ()
    async with stead.Runtime(f"sqlite:///{tmp_path / 'c.db'}", agents=[agent]) as rt:
        for i in range(3):  # what the code before wrote: the whole history in every run
            text = f"message {i}"
            await rt.store.record_message(  # type: ignore[attr-defined]
                "c",
                message_id=f"m{i}",
                run_id=f"run_old{i}",
                agent="chat",
                input={"role": "user", "content": text},
                now=0.0,
            )
            event = RunCreated(
                run_id=f"run_old{i}", agent="chat", input=text, session_id="c", history=earlier
            )
            await rt.store.create_run(event, now=0.0)
            view = await rt.run(f"run_old{i}")
            earlier = (
                *earlier,
                UserMessage(content=text),
                AssistantMessage(text=view.output or ""),
            )
        assert view.output == "answer to 'message 2' after 2 messages, 2 answers"
        new = await rt.send("c", "message 3")
        assert new.output == "answer to 'message 3' after 3 messages, 3 answers"
        stored = await _created(rt, new.run_id)
        assert stored.history_from == "run_old2" and len(stored.history) == 2
    async with stead.Runtime(f"sqlite:///{tmp_path / 'c.db'}", agents=[agent]) as fresh:
        assert (await fresh.get(new.run_id)).messages == (
            *earlier,
            UserMessage(content="message 3"),
            AssistantMessage(text=new.output or ""),
        )


async def test_take_up_messages_creates_each_left_message_after_the_one_before(
    url: str,
) -> None:
    """Two messages left unanswered in a row: the first is taken up, the second waits for
    its answer (it must see it), and is queued when that answer is recorded; none twice."""
    agent = stead.Agent("chat", ScriptedModel([echo] * 8))
    async with stead.Runtime(url, agents=[agent]) as rt:
        await rt.send("c", "one", agent=agent)
        for n, text in ((1, "two"), (2, "three")):
            await rt.store.record_message(  # type: ignore[attr-defined]
                "c",
                message_id=f"left{n}",
                run_id=f"run_left{n}",
                agent="chat",
                input={"role": "user", "content": text},
                now=rt.clock() - 60,
            )
        assert await rt.take_up_messages(older_than=3600) == []  # its sender may be on it
        assert await rt.take_up_messages(older_than=0) == ["run_left1"]
        assert await rt.take_up_messages(older_than=0) == []  # left2 waits for left1's answer
        assert (await rt.run("run_left1")).output == "answer to 'two' after 1 messages, 1 answers"
        # the run that answered left1 queued the next message's run as it finished
        assert (await rt.get("run_left2")).status.value == "queued"
        assert await rt.take_up_messages(older_than=0) == []
        view = await rt.run("run_left2")
        assert view.output == "answer to 'three' after 2 messages, 2 answers"
        assert await rt.take_up_messages(older_than=0) == []
