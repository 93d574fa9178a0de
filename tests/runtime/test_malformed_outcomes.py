"""An executor is outside the runtime: what it settles an effect with is read as strictly as a
stored row. A malformed outcome (a field missing, an unknown kind or failure code, a value of
the wrong type) is an ``ExecutorError`` naming the key and the executor, from the ledger and
over HTTP alike; and only the holder of a key can settle it, whatever epoch another knows."""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import stead
from stead.core.effects import Assignment, AssignmentKey, ToolBody, ToolFailed
from stead.errors import ExecutorError
from stead.runtime import StoreExecutor
from stead.runtime.executors import outcome_from_json, read_outcome
from stead.store import open_store
from stead.store.ledger import Ledger, ledger_for

T0 = 1_000.0
KEY = AssignmentKey(session_id="s", run_id="r1", effect_id="e1")
MALFORMED: list[Any] = [
    {"kind": "tool_succeeded"},
    {"kind": "tool_succeeded", "content": 5},
    {"kind": "tool_succeeded", "content": None},
    {"kind": "tool_failed", "failure": ["x"]},
    {"kind": "tool_failed", "failure": "f", "retry": "yes"},
    {"kind": "tool_unknown", "reason": {"why": 1}},
    {"kind": "model_failed", "code": "made_up_code", "message": "m"},
    {"kind": "model_failed", "code": 429},
    {"kind": "model_failed", "code": "rate_limited", "retry_after": "soon"},
    {"kind": "model_failed", "code": "rate_limited", "retry_after": -1},
    {"kind": "model_succeeded", "message": "hello"},
    {"kind": "model_succeeded", "message": {"role": "assistant", "text": 5}},
    {"kind": "teleported"},
    {"content": "no kind"},
    "tool_succeeded",
    None,
    [],
]


@pytest.mark.parametrize("data", MALFORMED, ids=repr)
def test_a_malformed_outcome_is_an_executor_error_naming_key_and_executor(data: Any) -> None:
    with pytest.raises(ExecutorError) as caught:
        read_outcome(data, KEY, "'executor-a'")
    text = str(caught.value)
    assert "executor 'executor-a' settled effect e1 of run 'r1'" in text
    assert (caught.value.run_id, caught.value.effect_id) == ("r1", "e1")
    with pytest.raises(ValueError):  # the decoder itself coerces nothing
        outcome_from_json(data)


def test_what_an_executor_may_leave_out_has_its_default() -> None:
    assert outcome_from_json({"kind": "tool_failed", "failure": "f"}) == ToolFailed(failure="f")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
async def ledger(url: str) -> AsyncIterator[tuple[Any, Ledger]]:
    store = open_store(url)
    led = ledger_for(store, poll_interval=0.05)
    yield store, led
    await led.close()
    await store.close()


def _assignment() -> Assignment:
    return Assignment(
        key=KEY,
        body=ToolBody(
            tool_name="index_doc",
            definition_digest="",
            arguments="{}",
            effect_class="read_only",
            replay_policy="rerun",
            tool_call_id="c",
            turn_index=0,
            idempotency_key="k",
            attempt=1,
        ),
    )


async def test_an_outcome_settled_in_the_ledger_is_read_strictly(
    ledger: tuple[Any, Ledger],
) -> None:
    store, led = ledger
    ex = StoreExecutor(store, ledger=led, clock=lambda: T0)
    await ex.dispatch(_assignment(), signal=stead.AbortSignal())
    await led.heartbeat("executor-a", ["default"], ttl=30, now=T0)
    [c] = await led.claim("executor-a", ["default"], limit=1, now=T0)
    assert await led.start("e1", epoch=c.epoch, now=T0)
    wrong = {"kind": "tool_succeeded", "content": 42}
    assert await led.settle("e1", epoch=c.epoch, outcome=wrong, now=T0, executor="executor-a")
    with pytest.raises(ExecutorError, match=r"executor 'executor-a' settled effect e1.*'content'"):
        await ex.outcome(KEY)


async def test_only_the_holder_settles_a_key(ledger: tuple[Any, Ledger]) -> None:
    store, led = ledger
    assert inspect.signature(Ledger.settle).parameters["executor"].default is inspect._empty
    ex = StoreExecutor(store, ledger=led, clock=lambda: T0)
    await ex.dispatch(_assignment(), signal=stead.AbortSignal())
    await led.heartbeat("holder", ["default"], ttl=30, now=T0)
    [c] = await led.claim("holder", ["default"], limit=1, now=T0)
    done = {"kind": "tool_succeeded", "content": "mine"}
    # Another who knows the epoch (it is in every read of the key) settles nothing.
    assert not await led.settle("e1", epoch=c.epoch, outcome=done, now=T0, executor="intruder")
    assert await led.settle("e1", epoch=c.epoch, outcome=done, now=T0, executor="holder")


class _Garbage(BaseHTTPRequestHandler):
    """A far executor whose every answer is an outcome that is not one."""

    def do_GET(self) -> None:
        body = b'{"kind": "tool_succeeded", "content": [1]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


async def test_an_http_executor_answering_garbage_is_named() -> None:
    from stead.server._executor_http import HttpExecutor

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        ex = HttpExecutor(url, "t" * 20)
        with pytest.raises(ExecutorError, match=rf"executor '{url}/?'.*effect e1"):
            await ex.outcome(KEY)
    finally:
        server.shutdown()
        server.server_close()
