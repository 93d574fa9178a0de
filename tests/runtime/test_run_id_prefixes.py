"""One id rule everywhere: every ``Runtime`` method that takes a run id takes the start of
one (as ``stead runs list`` prints it), the rule the CLI and the HTTP routes apply.

A start names a run when it has at least four characters (``run_`` aside) and starts that
run's id alone; an exact id always names itself. Anything else is refused before anything is
written: a start of several ids (or too short a one) is an ``AmbiguousId`` holding the
candidates, a start of none is ``RunNotFound``, an empty id is a ``UserError``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stead
from stead.core.events import RunCreated
from stead.core.states import RunStatus
from stead.errors import AmbiguousId, RunNotFound, UserError
from stead.testing import Reply, ScriptedModel

EXAMPLES = int(os.environ.get("STEAD_FUZZ_EXAMPLES", "60"))


@stead.tool(effect="non_idempotent", requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


HELLO = stead.Agent("hello", ScriptedModel([lambda request: "hi"]))
GATED = stead.Agent(
    "gated", ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 7})]), "done"]), [refund]
)
ASKER = stead.Agent(
    "asker",
    ScriptedModel([Reply(tool_calls=[("ask_user", {"question": "Which?"})]), "noted"]),
    [stead.question_tool(str)],
)
AGENTS = [HELLO, GATED, ASKER]


def _hex() -> str:
    return uuid.uuid4().hex


async def _made(rt: stead.Runtime, kind: str, run_id: str) -> None:
    """A run of ``kind`` with the id ``run_id``."""
    agent = {"gated": GATED, "asked": ASKER}.get(kind, HELLO)
    await rt.start(agent, "go", run_id=run_id)
    if kind in ("done", "gated", "asked"):
        await rt.run(run_id)
    elif kind == "cancelled":
        await rt.cancel(run_id)


@dataclass(frozen=True)
class Call:
    kind: str
    """The run the method is called on (``_made``)."""
    call: Callable[[stead.Runtime, str, str], Awaitable[Any]]
    """Called with the runtime, the text typed, and the run's whole id (for its call's id)."""
    check: Callable[[Any, str], bool]
    """Whether what the call returned is about the run (its whole id given)."""


async def _first_followed(rt: stead.Runtime, run_id: str) -> Any:
    async for item in rt.follow(run_id):
        return item
    return None


async def _decide(rt: stead.Runtime, text: str, whole: str, how: str) -> stead.RunView:
    call = (await rt.get(whole)).approvals[0].tool_call_id
    if how == "answer":
        return await rt.answer(text, call, "the red one")
    if how == "deny":
        return await rt.deny(text, call, "no")
    if how == "decide":
        return await rt.decide(text, call, "approve")
    return await rt.approve(text, call)


def _view_of(result: Any, run_id: str) -> bool:
    return bool(result.run_id == run_id)


def _decided(result: Any, run_id: str) -> bool:
    return _view_of(result, run_id) and not result.approvals


def _forked(result: Any, run_id: str) -> bool:
    return bool(result.status is RunStatus.QUEUED and result.run_id != run_id)


CALLS: dict[str, Call] = {
    "get": Call("done", lambda rt, i, _: rt.get(i), _view_of),
    "state": Call("done", lambda rt, i, _: rt.state(i), _view_of),
    "events": Call("done", lambda rt, i, _: rt.events(i), lambda r, i: r[0].event.run_id == i),
    "steps": Call("done", lambda rt, i, _: rt.steps(i), lambda r, i: len(r.turns) == 1),
    "tree": Call("done", lambda rt, i, _: rt.tree(i), _view_of),
    "resume_refusal": Call("done", lambda rt, i, _: rt.resume_refusal(i), lambda r, i: bool(r)),
    "wait": Call("done", lambda rt, i, _: rt.wait(i, timeout=0), _view_of),
    "follow": Call(
        "done", lambda rt, i, _: _first_followed(rt, i), lambda r, i: r.event.run_id == i
    ),
    "fork": Call("done", lambda rt, i, _: rt.fork(i, at_turn=0, input="again"), _forked),
    "message_of": Call("chat", lambda rt, i, _: rt.message_of(i), _view_of),
    "run": Call("queued", lambda rt, i, _: rt.run(i), lambda r, i: r.output == "hi"),
    "cancel": Call(
        "queued", lambda rt, i, _: rt.cancel(i), lambda r, i: r.status is RunStatus.CANCELLED
    ),
    "requeue": Call(
        "cancelled", lambda rt, i, _: rt.requeue(i), lambda r, i: r.status is RunStatus.QUEUED
    ),
    "resume": Call(
        "cancelled", lambda rt, i, _: rt.resume(i), lambda r, i: r.status is RunStatus.COMPLETED
    ),
    "approve": Call("gated", lambda rt, i, w: _decide(rt, i, w, "approve"), _decided),
    "deny": Call("gated", lambda rt, i, w: _decide(rt, i, w, "deny"), _decided),
    "decide": Call("gated", lambda rt, i, w: _decide(rt, i, w, "decide"), _decided),
    "answer": Call("asked", lambda rt, i, w: _decide(rt, i, w, "answer"), _decided),
}


def test_every_method_that_takes_a_run_id_is_in_the_table() -> None:
    # A new method that takes a run id joins the tests below by failing this one.
    takes = set()
    for name, member in inspect.getmembers(stead.Runtime):
        if name.startswith("_") or not callable(member):
            continue
        params = list(inspect.signature(member).parameters)
        if params[:2] == ["self", "run_id"]:
            takes.add(name)
    assert takes == set(CALLS)


async def _log(rt: stead.Runtime) -> dict[str, int]:
    return {r.run_id: r.last_seq for r in await rt.list_runs(limit=1000)}


@pytest.mark.parametrize("method", sorted(CALLS))
async def test_a_method_takes_the_start_of_an_id_and_refuses_an_ambiguous_one(
    tmp_path: Path, method: str
) -> None:
    spec = CALLS[method]
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=AGENTS) as rt:
        if spec.kind == "chat":
            target = (await rt.send("c-1", "hello there", agent=HELLO)).run_id
        else:
            target = f"run_{_hex()}"
            await _made(rt, spec.kind, target)
        # A twin sharing the target's first 8 hex digits, made the same way.
        twin = f"{target[:12]}{_hex()[:24]}"
        await _made(rt, "queued" if spec.kind == "chat" else spec.kind, twin)
        before = await _log(rt)

        for shared in (target[4:12], target[:12]):  # with or without run_
            with pytest.raises(AmbiguousId, match="start of 2 runs") as refused:
                await spec.call(rt, shared, target)
            assert set(refused.value.candidates) == {target, twin}
        for short in ("", target[4:7]):
            with pytest.raises(UserError):
                await spec.call(rt, short, target)
        if method == "message_of":  # a run answering no message has none: not an error
            assert await spec.call(rt, _hex()[:12], target) is None
        else:
            with pytest.raises(RunNotFound):
                await spec.call(rt, _hex()[:12], target)
        assert await _log(rt) == before  # nothing was written by a refused call

        shown = target[4:16]  # what `stead runs list` prints
        assert spec.check(await spec.call(rt, shown, target), target)
        if method not in ONCE:
            assert spec.check(await spec.call(rt, target, target), target)  # the whole id too


ONCE = {"run", "cancel", "requeue", "resume", "approve", "deny", "decide", "answer"}
"""Methods that change the run: called a second time (with the whole id), they find the run
moved on (a second decision is refused)."""


# -- the rule over real ids, on both stores ---------------------------------------------------

# Generated ids that share starts of every length, and chosen ids that are starts of others
# (an exact id names itself even when it starts other ids).
FIXED = (
    "run_aaaa0000000000000000000000000001",
    "run_aaaa0000000000000000000000000002",
    "run_aaab0000000000000000000000000000",
    "run_abcd1234abcd1234abcd1234abcd1234",
    "aaaa",
    "run_aaaa",
    "r1",
)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ids.db'}"
    else:
        yield request.getfixturevalue("pg_url")


def _expected(text: str, ids: list[str]) -> str | type[Exception]:
    """The rule, stated plainly: what ``text`` names among ``ids``."""
    if not text:
        return UserError  # never the start of every id
    if text in ids:
        return text
    found = [i for i in ids if i.startswith(text) or i.startswith(f"run_{text}")]
    if not found:
        return RunNotFound
    if len(text.removeprefix("run_")) < 4 or len(found) > 1:
        return AmbiguousId
    return found[0]


def test_every_start_of_a_real_id_names_its_run_or_is_refused(url: str) -> None:
    loop = asyncio.new_event_loop()
    rt = stead.Runtime(url, agents=[HELLO])

    async def seed() -> list[str]:
        for run_id in FIXED:
            await rt.start(HELLO, "go", run_id=run_id)
        await rt.run(FIXED[0])
        for _ in range(5):
            await rt.start(HELLO, "go")
        return [r.run_id for r in await rt.list_runs(limit=100)]

    async def read(how: str, text: str) -> str:
        if how == "get":
            return (await rt.get(text)).run_id
        if how == "events":
            first = (await rt.events(text))[0].event
            assert isinstance(first, RunCreated)
            return first.run_id
        return (
            (await rt.wait(text, timeout=0)).run_id
            if text == FIXED[0]
            else ((await rt.tree(text)).run_id)
        )

    try:
        ids = loop.run_until_complete(seed())
        assert len(ids) == len(FIXED) + 5

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        @given(
            whole=st.sampled_from(ids),
            cut=st.integers(0, 40),
            bare=st.booleans(),
            how=st.sampled_from(["get", "events", "other"]),
        )
        def check(whole: str, cut: int, bare: bool, how: str) -> None:
            text = whole[:cut]
            if bare:
                text = text.removeprefix("run_")
            expected = _expected(text, ids)
            if isinstance(expected, str):
                assert loop.run_until_complete(read(how, text)) == expected
                return
            with pytest.raises(expected) as refused:
                loop.run_until_complete(read(how, text))
            if expected is AmbiguousId:
                assert isinstance(refused.value, AmbiguousId)
                named = {i for i in ids if i.startswith(text) or i.startswith(f"run_{text}")}
                assert set(refused.value.candidates) == named
                assert "type" in str(refused.value)  # it says what to do

        check()
    finally:
        loop.run_until_complete(rt.close())
        loop.close()


async def test_export_takes_starts_of_ids_and_refuses_an_ambiguous_one(tmp_path: Path) -> None:
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=AGENTS) as rt:
        target = f"run_{_hex()}"
        await _made(rt, "done", target)
        await _made(rt, "done", f"{target[:12]}{_hex()[:24]}")
        with pytest.raises(AmbiguousId, match="start of 2 runs"):
            await rt.export(tmp_path / "two.jsonl", run_ids=[target[4:12]])
        assert await rt.export(tmp_path / "one.jsonl", run_ids=[target[4:16]]) == 1
        assert target in (tmp_path / "one.jsonl").read_text()
