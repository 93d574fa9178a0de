"""Chat handed to the workers: a message posted over HTTP (``POST
/conversations/{id}/messages``) or submitted from Python (``Runtime.submit``) is answered by a
``stead worker`` process, and ``GET /runs/{id}/wait`` / ``Runtime.wait`` hear the answer.

One stack for the module: ``stead serve`` without a worker of its own, one ``stead worker``,
one SQLite file; each test talks in a conversation of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from _agents import build
from _stack import Stack

import stead


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("chat")
    s = Stack(f"sqlite:///{folder / 'chat.db'}", folder)
    s.serve()
    s.worker()
    yield s
    s.close()


def _client(stack: Stack) -> httpx.Client:
    assert stack.client is not None
    return stack.client


def _post(stack: Stack, conversation: str, text: str, **extra: str) -> dict:
    sent = _client(stack).post(
        f"/conversations/{conversation}/messages", json={"text": text, **extra}
    )
    assert sent.status_code == 202, sent.text
    return sent.json()


def _wait(stack: Stack, run_id: str, timeout: float = 50) -> httpx.Response:
    # The worker may still be importing stead when the module's first test waits.
    return _client(stack).get(
        f"/runs/{run_id}/wait", params={"timeout": timeout}, timeout=timeout + 10
    )


def test_a_message_posted_over_http_is_answered_by_the_worker(stack: Stack) -> None:
    first = _post(stack, "chat-http", "hello", agent="chatty")
    assert first["position"] == 0 and first["text"] == "hello"
    rested = _wait(stack, first["run_id"][:12])  # the start of an id, as `runs list` shows
    assert rested.status_code == 200, rested.text
    assert rested.json()["run_id"] == first["run_id"]
    assert rested.json()["status"] == "completed"
    assert rested.json()["output"] == "You said: hello"

    # Two at once: the second is recorded while the first is answered, then answered after
    # it, seeing it (the worker that finishes one queues the next).
    second = _post(stack, "chat-http", "one")
    third = _post(stack, "chat-http", "two", message_id="m-two")
    assert _post(stack, "chat-http", "two", message_id="m-two")["run_id"] == third["run_id"]
    last = _wait(stack, third["run_id"]).json()
    assert last["status"] == "completed" and last["output"] == "You said: two"
    talk = _client(stack).get("/conversations/chat-http").json()
    assert [(m["position"], m["text"], m["status"], m["output"]) for m in talk["messages"]] == [
        (0, "hello", "completed", "You said: hello"),
        (1, "one", "completed", "You said: one"),
        (2, "two", "completed", "You said: two"),
    ]
    assert talk["messages"][1]["run_id"] == second["run_id"]
    seen = _client(stack).get(f"/runs/{third['run_id']}/messages").json()
    assert [m["role"] for m in seen] == ["user", "assistant"] * 3


def test_a_message_behind_a_question_waits_for_its_answer(stack: Stack) -> None:
    asked = _post(stack, "chat-ask", "ask: Standard or express?", agent="chatty")
    waiting = _wait(stack, asked["run_id"]).json()
    assert waiting["status"] == "awaiting_approval"
    (question,) = waiting["approvals"]
    assert question["reason"] == "question"
    # At rest already: the wait answers at once.
    assert _wait(stack, asked["run_id"]).json()["status"] == "awaiting_approval"

    behind = _post(stack, "chat-ask", "and when?")
    assert behind["status"] is None  # not created: the message before it waits on a person
    assert _wait(stack, behind["run_id"], timeout=0.2).status_code == 204

    url = f"/runs/{asked['run_id']}/questions/{question['tool_call_id']}/answer"
    assert _client(stack).post(url, json={"value": "express"}).status_code == 200
    answered = _wait(stack, asked["run_id"]).json()
    assert answered["status"] == "completed" and answered["output"] == "You said: express"
    after = _wait(stack, behind["run_id"]).json()
    assert after["status"] == "completed" and after["output"] == "You said: and when?"


def test_a_message_submitted_from_python_is_answered_by_the_worker(stack: Stack) -> None:
    async def main() -> None:
        async with stead.Runtime(stack.store, agents=build()) as rt:
            run_id = await rt.submit("chat-py", "hi there", agent="chatty")
            assert (await rt.get(run_id)).status is stead.RunStatus.QUEUED  # not driven here
            nxt = await rt.submit("chat-py", "still there?")
            view = await rt.wait(nxt, timeout=50)
            assert view.status is stead.RunStatus.COMPLETED
            assert view.output == "You said: still there?"
            assert (await rt.wait(run_id[:12], timeout=0)).output == "You said: hi there"

            asked = await rt.submit("chat-py", "ask: Which colour?")
            view = await rt.wait(asked, timeout=50)
            assert view.status is stead.RunStatus.AWAITING_APPROVAL
            held = await rt.submit("chat-py", "thanks")
            with pytest.raises(stead.WaitTimeout, match="waits for run") as timed_out:
                await rt.wait(held, timeout=0.1)
            assert isinstance(timed_out.value, TimeoutError)
            with pytest.raises(stead.RunNotFound):
                await rt.wait("run_nosuchrun", timeout=1)

    asyncio.run(main())


def test_bad_chat_requests_are_4xx(stack: Stack) -> None:
    client = _client(stack)
    no_agent = client.post("/conversations/nobody-yet/messages", json={"text": "hi"})
    assert no_agent.status_code == 400 and "pass the agent" in no_agent.json()["detail"]
    empty = client.post("/conversations/c/messages", json={"text": "", "agent": "chatty"})
    assert empty.status_code == 422
    unknown = client.post("/conversations/c/messages", json={"text": "hi", "agent": "nope"})
    assert unknown.status_code == 422 and "nope" in unknown.json()["detail"]
    assert client.get("/runs/run_nosuchrun/wait", params={"timeout": 0}).status_code == 404
    assert client.get("/runs/x/wait", params={"timeout": 600}).status_code == 422
    assert client.get("/conversations/never-used").json() == {
        "conversation_id": "never-used",
        "messages": [],
    }
    assert (
        httpx.post(f"{stack.url}/conversations/c/messages", json={"text": "x"}).status_code == 401
    )
