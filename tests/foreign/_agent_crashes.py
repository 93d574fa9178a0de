"""The crash harness every framework integration shares: one seed agent (look the customer
up; send the message; say so), SIGKILLed at each named crash point of a turn, then finished
by another process; the message is delivered exactly once, every call has exactly one
result, and the run completes.

Each framework's test module is thin: a ``Framework`` (its agent, the directory its child
processes import it from, its call ids and its replies in the provider's wire format), the
cases it runs, and the two tests calling ``killed_then_resumed`` and
``worker_killed_another_finishes`` (``crash_point_tests`` makes them);
``budget_spent_before_a_crash`` resumes a killed run
under a budget in the test's own process.

Cases: by default every point on SQLite driven by ``stead run`` / ``stead resume``, and a
spread of points on PostgreSQL, in the ``effects`` durability mode and driven by ``stead
worker`` processes; ``STEAD_TEST_ALL_MODES=1`` (``make soak``) runs every point in every
store, mode and driver.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
from wire_server import Reply, Seen, WireServer
from wire_shapes import anthropic_stream, openai_stream

from _spawn import stead_cli, stead_popen
from _wait import until
from stead import Budget, Runtime
from stead.core.events import ToolResultRecorded
from stead.runtime import OwnedRun
from stead.store import open_store
from stead.testing import assert_valid_history

CUSTOMER = '{"email": "ada@example.com"}'
MESSAGE = '{"to": "ada@example.com", "text": "Your refund is on its way."}'
PROMPT = "Tell Ada her refund is on its way."
ANSWER = "Ada has been told."

TOOLS = ("find_customer", "send_message")
CRASHES = [
    "mid_model_call#1",
    "mid_model_call#2",
    "mid_model_call#3",
    "after_intent#1",
    "after_intent#2",
    "after_tool_started:send_message",
    *[
        f"{p}:{t}"
        for p in ("after_tool_effect", "before_result_commit", "after_result_commit")
        for t in TOOLS
    ],
]
"""Every named point of the seed scenario's three turns, each reached at a known place."""

FULL = os.environ.get("STEAD_TEST_ALL_MODES") == "1"
"""Every point in every store, mode and driver (``make soak`` sets it)."""

DYING_LEASE = 5.0
"""The lease of a worker the test kills, in seconds. The survivor may take the run over
once that lease lapses in the store: at the default TTL (30 s) every case would wait most of
half a minute for it. Renewed every third of it, and trusted locally for three quarters of
it, it still leaves a live worker seconds of slack on a loaded machine."""


class EnvFn(Protocol):
    def __call__(self, url: str, ledger: Path, **extra: str) -> dict[str, str]: ...


@dataclass(frozen=True, slots=True)
class Framework:
    """One integration's seed agent, as the harness drives it."""

    agent: str
    """``module:attr`` of the agent, importable from ``home``."""
    home: Path
    """The directory the children run in (their ``sys.path[0]``)."""
    provider: str
    """The wire format the agent's model speaks: ``anthropic`` or ``openai``."""
    ids: tuple[str, str]
    """The call ids the model gives ``find_customer`` and ``send_message``."""
    env: EnvFn
    """The children's environment: the wire server's URL, the deliveries file, ``extra``."""
    warm: tuple[str, ...] = ()
    """The modules its children import beyond the CLI's (the framework, the model classes):
    imported once by the parent they are forked from."""

    def replies(self) -> list[Reply]:
        """The three turns: look the customer up; send the message; say so."""
        found, sent = self.ids
        return [
            calls_reply(self.provider, (found, "find_customer", CUSTOMER)),
            calls_reply(self.provider, (sent, "send_message", MESSAGE)),
            text_reply(self.provider, ANSWER),
        ]


# -- the model's side --------------------------------------------------------------------------


def calls_reply(provider: str, *calls: tuple[str, str, str]) -> Reply:
    """One reply asking for ``calls`` (id, tool, JSON arguments)."""
    tools = [(cid, name, [args]) for cid, name, args in calls]
    if provider == "anthropic":
        return anthropic_stream(tools=tools)
    return openai_stream(tools=tools)


def text_reply(provider: str, text: str) -> Reply:
    return anthropic_stream(text) if provider == "anthropic" else openai_stream(text)


def call_ids(provider: str) -> tuple[str, str]:
    """The seed's two call ids in ``provider``'s style."""
    return ("toolu_01", "toolu_02") if provider == "anthropic" else ("call_01", "call_02")


def seed_replies(provider: str) -> list[Reply]:
    """The seed scenario in two turns: both calls at once, then the answer."""
    found, sent = call_ids(provider)
    return [
        calls_reply(provider, (found, "find_customer", CUSTOMER), (sent, "send_message", MESSAGE)),
        text_reply(provider, ANSWER),
    ]


def tool_results(provider: str, seen: Seen) -> dict[str, str]:
    """The tool results a request sent the model, by call id."""
    found: dict[str, str] = {}
    for message in seen.body["messages"]:
        if provider == "anthropic":
            content = message.get("content")
            if isinstance(content, list):
                for block in content:
                    if block.get("type") == "tool_result":
                        text = block.get("content")
                        if isinstance(text, list):
                            text = "".join(b.get("text", "") for b in text)
                        found[block["tool_use_id"]] = str(text)
        elif message.get("role") == "tool":
            found[message["tool_call_id"]] = str(message.get("content"))
    return found


# -- the children ----------------------------------------------------------------------------


def base_env(ledger: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a child, minus any crash point, plus ``extra``."""
    out = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
    out.update(STEAD_TEST_LEDGER=str(ledger), COLUMNS="160", **extra)
    return out


def deliveries(ledger: Path) -> list[dict[str, Any]]:
    """The deliveries ``send_message`` made: the outside world the tests count in."""
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line]


# -- cases ---------------------------------------------------------------------------------


def resume_cases(*, spread: Sequence[str], effects: Sequence[str]) -> list[Any]:
    """(store, mode, crash) for ``killed_then_resumed``: every point on SQLite in ``strict``;
    ``spread`` on PostgreSQL, and ``effects`` in the ``effects`` mode on both stores."""
    return [
        *[pytest.param("sqlite", "strict", c, id=f"sqlite-strict-{c}") for c in CRASHES],
        *[
            pytest.param("postgres", "strict", c, id=f"postgres-strict-{c}")
            for c in (CRASHES if FULL else spread)
        ],
        *[
            pytest.param(s, "effects", c, id=f"{s}-effects-{c}")
            for s in ("sqlite", "postgres")
            for c in (CRASHES if FULL else effects)
        ],
    ]


def worker_cases(*, sqlite: Sequence[str], postgres: Sequence[str]) -> list[Any]:
    """(store, crash) for ``worker_killed_another_finishes``."""
    return [
        *[pytest.param("sqlite", c, id=f"sqlite-{c}") for c in (CRASHES if FULL else sqlite)],
        *[pytest.param("postgres", c, id=f"postgres-{c}") for c in (CRASHES if FULL else postgres)],
    ]


SPREAD = ("after_intent#2", "after_tool_effect:send_message", "after_result_commit:send_message")
"""The points killed on PostgreSQL by default: an intent, and the non_idempotent call's
effect and result in flight."""


def crash_point_tests(
    fw: Framework,
    *,
    spread: Sequence[str] = SPREAD,
    effects: Sequence[str] = ("after_tool_effect:send_message",),
    workers: Sequence[str] = ("after_intent#2", "after_tool_effect:send_message"),
    pg_workers: Sequence[str] = ("after_tool_effect:send_message",),
) -> tuple[Callable[..., None], Callable[..., None]]:
    """A framework's two crash-point tests, for its module to bind to test names:
    ``killed_then_resumed`` over ``resume_cases(spread, effects)`` and
    ``worker_killed_another_finishes`` over ``worker_cases(workers, pg_workers)``."""

    @pytest.mark.parametrize(
        ("kind", "mode", "crash"), resume_cases(spread=spread, effects=effects)
    )
    def resumed(kind: str, mode: str, crash: str, tmp_path: Path, request: Any) -> None:
        killed_then_resumed(fw, kind, mode, crash, tmp_path, request)

    @pytest.mark.parametrize(("kind", "crash"), worker_cases(sqlite=workers, postgres=pg_workers))
    def taken_over(kind: str, crash: str, tmp_path: Path, request: Any) -> None:
        worker_killed_another_finishes(fw, kind, crash, tmp_path, request)

    return resumed, taken_over


# -- the two scenarios -----------------------------------------------------------------------


def killed_then_resumed(
    fw: Framework, kind: str, mode: str, crash: str, tmp_path: Path, request: Any
) -> None:
    """``stead run`` is SIGKILLed at ``crash``; ``stead resume`` finishes the run."""
    store = _store_url(kind, tmp_path, request)
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.answer_by_turn(*fw.replies())
        e = fw.env(server.url, ledger, STEAD_DURABILITY=mode)
        died = stead_cli(
            "--store",
            store,
            "run",
            fw.agent,
            PROMPT,
            env={**e, "STEAD_CRASH_AT": crash},
            cwd=fw.home,
            warm=fw.warm,
        )
        assert died.returncode == -9, f"{crash} never fired: {died.stdout}{died.stderr}"
        run_id = asyncio.run(_final(store))[0].run_id
        done = _resume(fw, store, run_id, e)
        assert done.returncode == 0, done.stdout + done.stderr
        _check(fw, store, ledger, server)


def killed_after_delivery(fw: Framework, tmp_path: Path) -> None:
    """The seed scenario: ``stead run`` is SIGKILLed right after the message went out, before
    its result was recorded; ``stead resume`` asks the reconcile function instead of sending
    again, replays the first turn from the log, and completes."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*seed_replies(fw.provider))  # both calls in one turn
        e = fw.env(server.url, ledger)
        crash = {**e, "STEAD_CRASH_AT": "after_tool_effect:send_message"}
        died = stead_cli(
            "--store", store, "run", fw.agent, PROMPT, env=crash, cwd=fw.home, warm=fw.warm
        )
        assert died.returncode == -9, died.stdout + died.stderr
        assert len(deliveries(ledger)) == 1  # delivered; the result never recorded
        run_id = asyncio.run(_final(store))[0].run_id
        done = _resume(fw, store, run_id, e)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "completed" in done.stdout

    assert len(deliveries(ledger)) == 1, "delivered once"
    # Two model requests in all: the first turn was replayed from the log on resume.
    assert len(server.requests) == 2
    results = tool_results(fw.provider, server.requests[1])
    found, sent = fw.ids
    assert set(results) == {found, sent}
    assert "Ada" in results[found]
    assert '"delivered":true' in results[sent].replace(" ", "").lower()
    state, events = asyncio.run(_final(store))
    kinds = [e.kind for e in events]
    assert state.status.value == "completed"
    assert "tool_reconciled" in kinds  # the send in flight was asked about, never run again
    assert kinds.count("assistant_message") == 2


def budget_spent_before_a_crash(
    fw: Framework, tmp_path: Path, monkeypatch: Any, capped: Callable[[Budget], Any]
) -> None:
    """``stead run`` is SIGKILLed once turn 1's send is recorded as intent (two turns spent);
    this process resumes the run with ``capped(budget)``, the same agent (built once the
    children's environment is this process's too) under a budget the two turns overran: the
    run fails on its budget with no model call past it, and the recorded intent runs once."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*fw.replies())
        e = fw.env(server.url, ledger)
        died = stead_cli(
            "--store", store, "run", fw.agent, PROMPT,
            env={**e, "STEAD_CRASH_AT": "after_intent#2"}, cwd=fw.home, warm=fw.warm,
        )  # fmt: skip
        assert died.returncode == -9, died.stdout + died.stderr
        asked_before = len(server.requests)
        for k, v in e.items():
            monkeypatch.setenv(k, v)
        agent = capped(Budget(max_total_tokens=60))

        async def resume() -> Any:
            async with Runtime(store, agents=[agent]) as rt:
                (run,) = await rt.store.list_runs()
                return await rt.resume(run.run_id)

        outcome = asyncio.run(resume())
        asked_after = len(server.requests)
    assert outcome.status.value == "failed"
    assert "budget" in str(outcome.error)
    assert asked_after == asked_before == 2  # no model call past the budget
    assert len(deliveries(ledger)) == 1  # the recorded intent ran, once


def _resume(fw: Framework, store: str, run_id: str, env: dict[str, str]) -> Any:
    """``stead resume`` of ``run_id`` in a child process, to its end."""
    return stead_cli(
        "--store", store, "resume", run_id, "--agents", fw.agent, env=env, cwd=fw.home, warm=fw.warm
    )


def worker_killed_another_finishes(
    fw: Framework, kind: str, crash: str, tmp_path: Path, request: Any
) -> None:
    """A ``stead worker`` is SIGKILLed at ``crash``; once its lease lapses, another worker
    takes the run over and finishes it."""
    store = _store_url(kind, tmp_path, request)
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.answer_by_turn(*fw.replies())
        e = fw.env(server.url, ledger)
        asyncio.run(_queue(fw, store))
        worker = ["--store", store, "worker", "--agents", fw.agent, "--poll", "0.1"]
        first = stead_cli(
            *worker,
            "--lease-ttl",
            str(DYING_LEASE),
            env={**e, "STEAD_CRASH_AT": crash},
            cwd=fw.home,
            warm=fw.warm,
        )
        assert first.returncode == -9, f"{crash} never fired: {first.stderr}"
        second = stead_popen(*worker, env=e, cwd=fw.home, warm=fw.warm)
        try:
            # Each look opens the store: every 0.2 s leaves this process (and the wire server
            # thread in it, which the survivor's model calls need) the CPU of a loaded machine.
            until(_at_rest(store), "the second worker to finish the run", timeout=90, every=0.2)
        finally:
            second.send_signal(signal.SIGTERM)
            _, err = second.communicate(timeout=60)
        _check(fw, store, ledger, server, err)


# -- reading the outcome ---------------------------------------------------------------------


def _store_url(kind: str, tmp_path: Path, request: Any) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


async def _final(store: str) -> tuple[Any, list[Any]]:
    s = open_store(store)
    try:
        runs = await s.list_runs()
        assert len(runs) == 1, runs
        state, _ = await OwnedRun.load_state(s, runs[0].run_id)
        return state, [e.event for e in await s.read_events(runs[0].run_id)]
    finally:
        await s.close()


def _at_rest(store: str) -> Callable[[], bool]:
    def check() -> bool:
        state, _ = asyncio.run(_final(store))
        return state.status.value in ("completed", "failed", "awaiting_approval")

    return check


async def _queue(fw: Framework, store: str) -> None:
    import stead

    module, _, attr = fw.agent.partition(":")
    agent = getattr(importlib.import_module(module), attr)
    async with stead.Runtime(store, agents=[agent]) as rt:
        await rt.start(agent, PROMPT)


def _check(fw: Framework, store: str, ledger: Path, server: WireServer, log: str = "") -> None:
    """The run completed, each call has one result, the message went out once; ``log``:
    what the last child said, shown when the run did not complete."""
    state, events = asyncio.run(_final(store))
    assert state.status.value == "completed", f"{state.error}\n{log}"
    assert_valid_history(state)
    results = Counter(e.tool_call_id for e in events if isinstance(e, ToolResultRecorded))
    assert set(results) == set(fw.ids) and set(results.values()) == {1}
    assert len(deliveries(ledger)) == 1, "delivered exactly once"
    assert state.output == ANSWER
    # The last request carried both results under their ids, whatever was replayed.
    last = str(server.requests[-1].body["messages"])
    assert all(i in last for i in fw.ids)
