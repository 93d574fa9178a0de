"""Caller-side fuzzer: the Python API with hypothesis-built arguments.

``Limits``, ``Budget``, ``Agent`` and ``Runtime`` are built from arbitrary values, and a
sequence of ``start / run / approve / deny / decide / cancel / resume / get / state / events``
calls (and two drivers of one run at once) is made on a real SQLite store with a scripted
model. The promise: each call works or raises a ``SteadError`` (a caller's mistake is a
``UserError`` saying what to pass, never a raw ``TypeError`` later); nothing written cannot
be read back (by this ``Runtime`` and a fresh one); every run ends at rest when driven;
the history stays valid; no ``non_idempotent`` handler runs twice for one call.

A failure that is one of the known findings is recorded, not failed (``_fuzz.KNOWN``).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fuzz import check, check_loop, fuzz_settings, loop_errors, run_example, timeout_for, violated
from _tools import LEDGER, NON_IDEMPOTENT, TOOLS, reset, transfer
from _wire import texts
from hypothesis import example, given
from hypothesis import strategies as st

import stead
from stead.core.states import RunStatus
from stead.errors import SteadError, UserError
from stead.runtime import Backoff
from stead.testing import Reply, ScriptedModel, assert_valid_history

pytestmark = pytest.mark.fuzz

DIR = Path(tempfile.mkdtemp(prefix="stead-fuzz-api-"))
COUNTER = itertools.count()
FAST = Backoff(base=0.001, cap=0.001)
REST = {
    RunStatus.QUEUED,
    RunStatus.COMPLETED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.TIMED_OUT,
    RunStatus.AWAITING_APPROVAL,
}


@pytest.fixture(scope="module", autouse=True)
def in_a_scratch_folder() -> Iterator[None]:
    """A bare path is a SQLite file in the working directory: keep those out of the repo."""
    before = Path.cwd()
    os.chdir(DIR)
    try:
        yield
    finally:
        os.chdir(before)
        shutil.rmtree(DIR, ignore_errors=True)


class Opaque:
    """An object no JSON encoder knows."""

    def __repr__(self) -> str:
        return "Opaque()"


anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    texts,
    st.binary(max_size=4),
    st.lists(st.integers(-3, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(-3, 3), max_size=2),
    st.just(Opaque()),
)


def _bad_number(value: Any, minimum: float) -> bool:
    """True for what no ceiling can mean: not a number, a bool, NaN, or below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    return math.isnan(value) or value < minimum


# -- Limits, Budget, Agent ------------------------------------------------------------------


LIMIT_FIELDS = {"max_turns": 1, "max_tool_calls_per_turn": 1, "max_model_attempts": 1}
limit_kwargs = st.dictionaries(
    st.sampled_from([*LIMIT_FIELDS, "repeat_threshold", "approval_timeout", "cancel_grace"]),
    st.one_of(anything, st.integers(-3, 40), st.sampled_from(["10", 2.5, None])),
    max_size=3,
)
budget_kwargs = st.dictionaries(
    st.sampled_from(["max_input_tokens", "max_output_tokens", "max_total_tokens", "max_usd"]),
    st.one_of(anything, st.integers(-10, 10**6), st.just(-5)),
    max_size=2,
)


def _limits_should_refuse(kw: dict[str, Any]) -> str | None:
    for name, minimum in LIMIT_FIELDS.items():
        if name in kw and (_bad_number(kw[name], minimum) or not isinstance(kw[name], int)):
            return f"Limits({name}={kw[name]!r})"
    if "repeat_threshold" in kw:
        v = kw["repeat_threshold"]
        if _bad_number(v, 2) or not isinstance(v, int) or v > 32:
            return f"Limits(repeat_threshold={v!r})"
    for name in ("approval_timeout", "cancel_grace"):
        v = kw.get(name)
        if name in kw and v is not None and (_bad_number(v, 0) or math.isinf(v)):
            return f"Limits({name}={v!r})"
    return None


def _budget_should_refuse(kw: dict[str, Any]) -> str | None:
    for name, v in kw.items():
        if v is not None and _bad_number(v, 0):
            return f"Budget({name}={v!r})"
    return None


def _build(what: str, fn: Any, should_refuse: str | None) -> Any:
    """Build, or None when it raised a UserError; a violation for anything else."""
    try:
        built = fn()
    except UserError:
        return None
    except SteadError as exc:
        violated(f"{what} raised {type(exc).__name__}, not a UserError: {exc}", 9)
    except Exception as exc:
        violated(f"{what} raised {type(exc).__name__}: {exc}"[:300], 9)
    check(should_refuse is None, f"{should_refuse} was accepted; it should be a UserError", 9)
    return built


models = st.one_of(
    st.just("scripted"),
    st.just("scripted"),
    st.sampled_from(["anthropic:claude-x", "openai-compatible:http://127.0.0.1:9/v1:m", ""]),
    anything,
)
tools_args = st.one_of(
    st.just("tools"),
    st.just("one_tool"),
    st.just(None),
    st.lists(st.sampled_from(["lookup", "junk"]), max_size=2),
    anything,
)


async def _try_agent(
    name: Any, model: Any, tools: Any, system: Any, lim: dict[str, Any], bud: dict[str, Any]
) -> None:
    limits = _build(f"Limits(**{lim!r})", lambda: stead.Limits(**lim), _limits_should_refuse(lim))
    budget = _build(f"Budget(**{bud!r})", lambda: stead.Budget(**bud), _budget_should_refuse(bud))
    real_model = model == "scripted"
    if real_model:
        model = ScriptedModel([Reply(tool_calls=[("lookup", {"query": "x"})]), "done"])
    if tools == "tools":
        tools = TOOLS
    elif tools == "one_tool":
        tools = transfer
    elif isinstance(tools, list):
        tools = [TOOLS[0] if t == "lookup" else t for t in tools]
    wrong = None
    if not isinstance(name, str) or not name:
        wrong = f"Agent(name={name!r})"
    elif not isinstance(system, str):
        wrong = f"Agent(system={system!r})"
    elif not real_model and not isinstance(model, str):
        wrong = f"Agent(model={model!r})"
    elif not isinstance(tools, list | tuple) or not all(isinstance(t, stead.Tool) for t in tools):
        wrong = f"Agent(tools={tools!r})"[:80]
    agent = _build(
        f"Agent({name!r}, {model!r}, tools={tools!r}, system={system!r})"[:200],
        lambda: stead.Agent(name, model, tools, system, limits=limits, budget=budget),
        wrong,
    )
    if agent is None:
        return
    if not real_model and not (isinstance(model, str) and "127.0.0.1" in model):
        return  # a model string we accepted would call a real provider: not from a test
    store = f"sqlite:///{DIR / f'agent-{next(COUNTER)}.db'}"
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        rid = await rt.start(agent, "go")
        await _drive_to_rest(rt, rid, 9)
        await _read_back(rt, store, rid, set())


@pytest.mark.timeout(timeout_for(120))
@fuzz_settings(40)
@example(name="x", model="anthropic:claude-x", tools="tools", system="", lim={}, bud={})
@example(name="x", model="scripted", tools="one_tool", system="", lim={}, bud={})
@example(name="x", model="scripted", tools="tools", system="", lim={"max_turns": "10"}, bud={})
@example(name="x", model="scripted", tools="tools", system="", lim={}, bud={"max_total_tokens": -5})
@given(
    name=st.one_of(st.just("agent"), anything),
    model=models,
    tools=tools_args,
    system=st.one_of(st.just(""), anything),
    lim=limit_kwargs,
    bud=budget_kwargs,
)
def test_building_an_agent_works_or_says_what_to_pass(
    name: Any, model: Any, tools: Any, system: Any, lim: dict[str, Any], bud: dict[str, Any]
) -> None:
    reset()
    run_example(lambda: asyncio.run(_try_agent(name, model, tools, system, lim, bud)))


# -- Runtime ---------------------------------------------------------------------------------


stores = st.one_of(
    st.just("good"),
    st.sampled_from(["", "sqlite:///", "sqlite://", "sqlite:///:memory:", ":memory:"]),
    st.sampled_from(["mysql://x/y", "sqlite:x.db", "bare.db", "good-path"]),
    anything,
)


async def _try_store(url: Any) -> None:
    if url == "good":
        url = f"sqlite:///{DIR / f'store-{next(COUNTER)}.db'}"
    elif url == "good-path":
        url = DIR / f"store-{next(COUNTER)}.db"
    agent = stead.Agent("a", ScriptedModel(["hello"]))
    try:
        rt = stead.Runtime(url, agents=[agent])
    except SteadError:  # a UserError, or a StoreError for a file that cannot be opened
        return
    except Exception as exc:
        violated(f"Runtime({url!r}) raised {type(exc).__name__}: {exc}"[:300], 9)
    check(isinstance(url, str | Path), f"Runtime({url!r}) was accepted", 9)
    try:
        async with rt:
            rid = await rt.start(agent, "hi")
            view = await rt.run(rid)
    except SteadError:
        return
    except Exception as exc:
        violated(f"a run on Runtime({url!r}) raised {type(exc).__name__}: {exc}"[:300], 9)
    check(view.status is RunStatus.COMPLETED, f"a run on Runtime({url!r}) ended {view.status}")
    try:
        async with stead.Runtime(url, agents=[agent]) as again:
            seen = await again.get(rid)
    except SteadError as exc:
        violated(f"a completed run on {url!r} is gone for the next Runtime: {exc}"[:300], 8)
    check(seen.status is RunStatus.COMPLETED, f"the run on {url!r} reads back {seen.status}", 8)


@pytest.mark.timeout(timeout_for(120))
@fuzz_settings(25)
@example(url="")
@example(url=0)
@given(url=stores)
def test_a_store_url_works_or_is_refused(url: Any) -> None:
    run_example(lambda: asyncio.run(_try_store(url)))


# -- operations on runs ----------------------------------------------------------------------


def _script() -> ScriptedModel:
    """Turn 0 asks for a gated transfer, a charge, a refund and a lookup; then it answers."""
    return ScriptedModel(
        [
            Reply(
                tool_calls=[
                    ("transfer", {"amount": 500}),
                    ("charge", {"amount": 3}),
                    ("refund", {"amount": 4}),
                    ("lookup", {"query": "q"}),
                ]
            ),
            "all done",
        ]
    )


run_refs = st.one_of(st.integers(0, 2), texts)
call_refs = st.one_of(st.just("pending"), st.just("pending"), texts)
token_refs = st.one_of(st.just("pending"), st.none(), texts)

ops = st.one_of(
    st.tuples(
        st.just("start"),
        st.one_of(st.just("go"), anything),
        st.one_of(st.none(), texts),
        st.one_of(st.just(""), anything),
        st.one_of(st.none(), anything, st.dictionaries(texts, anything, max_size=2)),
    ),
    st.tuples(st.just("run"), run_refs),
    st.tuples(st.just("run_twice"), run_refs),
    st.tuples(
        st.just("approve"),
        run_refs,
        call_refs,
        token_refs,
        st.one_of(st.none(), anything, st.just({"amount": 7}), st.just({"c": Opaque()})),
    ),
    st.tuples(st.just("deny"), run_refs, call_refs, token_refs, anything),
    st.tuples(
        st.just("decide"),
        run_refs,
        call_refs,
        st.one_of(
            st.sampled_from(["approve", "deny", "happened", "not_happened", "skip"]), anything
        ),
        st.one_of(st.none(), anything),
    ),
    st.tuples(st.just("cancel"), run_refs, st.one_of(st.just("stop"), anything)),
    st.tuples(st.just("resume"), run_refs, st.one_of(st.just("again"), anything)),
    st.tuples(st.sampled_from(["get", "state", "events"]), run_refs, anything),
)


class Ops:
    def __init__(self, rt: stead.Runtime, agent: stead.Agent) -> None:
        self.rt = rt
        self.agent = agent
        self.runs: list[str] = []
        self.odd_inputs = False
        self.raced = False
        self.delay = 0.0

    def rid(self, ref: Any) -> Any:
        if isinstance(ref, int):
            return self.runs[ref % len(self.runs)] if self.runs else "run_missing"
        return ref

    async def pending(self, rid: Any, which: str) -> Any:
        try:
            view = await self.rt.get(rid)
        except SteadError:
            return None
        if not view.approvals:
            return None
        first = view.approvals[0]
        return first.tool_call_id if which == "call" else first.token

    async def do(self, op: tuple[Any, ...]) -> None:
        rt, name = self.rt, op[0]
        if name == "start":
            _, text, run_id, session, config = op
            self.odd_inputs |= not all(isinstance(v, str) for v in (text, session, run_id or ""))
            self.odd_inputs |= not isinstance(config, dict | None)
            kw: dict[str, Any] = {"session_id": session, "config": config}
            if run_id is not None:
                kw["run_id"] = run_id
            self.runs.append(await rt.start(self.agent, text, **kw))
            return
        rid = self.rid(op[1])
        if name in ("cancel", "resume", "deny"):
            self.odd_inputs |= not isinstance(op[-1] if name != "deny" else op[4], str)
        if name == "run":
            await rt.run(rid)
        elif name == "run_twice":
            self.raced = True

            async def second() -> Any:
                await asyncio.sleep(self.delay / 3)  # the first is inside a handler by now
                return await rt.run(rid)

            results = await asyncio.gather(rt.run(rid), second(), return_exceptions=True)
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, SteadError):
                    raise r
        elif name in ("approve", "deny", "decide"):
            call = op[2]
            if call == "pending":
                call = await self.pending(rid, "call")
            if name == "approve":
                token = await self.pending(rid, "token") if op[3] == "pending" else op[3]
                await rt.approve(rid, call, token=token, arguments=op[4])
            elif name == "deny":
                token = await self.pending(rid, "token") if op[3] == "pending" else op[3]
                await rt.deny(rid, call, op[4], token=token)
            else:
                await rt.decide(rid, call, op[3], result=op[4])
        elif name == "cancel":
            await rt.cancel(rid, op[2])
        elif name == "resume":
            await rt.resume(rid, op[2])
        elif name == "get":
            await rt.get(rid)
        elif name == "state":
            await rt.state(rid)
        else:
            await rt.events(rid, op[2])


def _has_surrogate(value: Any) -> bool:
    text = value if isinstance(value, str) else repr(value)
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def _blame_op(op: tuple[Any, ...], exc: BaseException, ops: Ops) -> int | None:
    if any(_has_surrogate(v) for v in op) and isinstance(exc, UnicodeError):
        return 3
    if op[0] == "start":
        return 2
    return 9


async def _drive_to_rest(rt: stead.Runtime, rid: str, finding: int | None) -> None:
    for _ in range(4):
        try:
            view = await rt.run(rid)
        except SteadError:
            continue
        except Exception as exc:
            violated(f"driving the run raised {type(exc).__name__}: {exc}"[:300], finding)
        check(view.status in REST, f"rt.run returned with the run {view.status}", finding)
        return
    violated("the run is not at rest after 4 drives", finding)


async def _read_back(rt: stead.Runtime, store: str, rid: str, blame: set[int]) -> None:
    finding = min(blame) if blame else None
    try:
        state = await rt.state(rid)
        await rt.events(rid)
        await rt.get(rid)
        async with stead.Runtime(store, agents=list(rt.agents.values())) as fresh:
            again = await fresh.state(rid)
    except Exception as exc:
        violated(
            f"run {rid[:40]!r} cannot be read back: {type(exc).__name__}: {exc}"[:300], finding
        )
    check(again.seq == state.seq, "a fresh Runtime reads another log")
    try:
        assert_valid_history(state)
    except AssertionError as exc:
        violated(f"invalid history: {exc}")


async def _try_ops(steps: list[tuple[Any, ...]], delay: float) -> None:
    reset()
    unhandled = loop_errors()
    store = f"sqlite:///{DIR / f'ops-{next(COUNTER)}.db'}"
    agent = stead.Agent("ops", _script(), TOOLS, limits=stead.Limits(max_turns=3, cancel_grace=0.2))
    async with stead.Runtime(store, agents=[agent], backoff=FAST) as rt:
        o = Ops(rt, agent)
        for step in [("start", "go", None, "", None), *steps]:
            if step[0] == "run_twice":
                import _tools

                _tools.HANDLER_DELAY[0] = o.delay = delay
            try:
                await o.do(step)
            except SteadError:
                pass
            except Exception as exc:
                violated(
                    f"{step!r:.200} raised {type(exc).__name__}: {exc}"[:400],
                    _blame_op(step, exc, o),
                )
        blame = {2} if o.odd_inputs else set()
        for rid in o.runs:
            try:
                status = (await rt.get(rid)).status
            except Exception as exc:
                violated(
                    f"run {rid[:40]!r} cannot be read: {type(exc).__name__}: {exc}"[:300],
                    min(blame) if blame else (3 if _has_surrogate(rid) else None),
                )
            if status not in REST:
                await _drive_to_rest(rt, rid, None)
            await _read_back(rt, store, rid, blame | ({3} if _has_surrogate(rid) else set()))
    for (_run, name, _key), n in LEDGER.items():
        if name in NON_IDEMPOTENT:
            check(
                n <= 1, f"non_idempotent {name} ran {n} times for one call", 5 if o.raced else None
            )
    check_loop(unhandled, collect=o.raced)


@pytest.mark.timeout(timeout_for(180))
@fuzz_settings(40)
@example(steps=[("run_twice", 0)], delay=0.3)
@example(steps=[("start", {"not": "str"}, None, "", None)], delay=0.0)
@example(steps=[("run", 0), ("approve", 0, "pending", "pending", {"c": Opaque()})], delay=0.0)
@given(steps=st.lists(ops, max_size=6), delay=st.sampled_from([0.0, 0.0, 0.3]))
def test_any_sequence_of_calls_works_or_raises_a_stead_error(
    steps: list[tuple[Any, ...]], delay: float
) -> None:
    run_example(lambda: asyncio.run(_try_ops(steps, delay)))


# -- found by this fuzzer --------------------------------------------------------------------


def test_a_worker_fenced_while_its_calls_run_in_parallel_leaves_no_unread_task_error() -> None:
    """Found by the caller fuzzer (two drivers of one run): when a worker is fenced while
    several calls of a turn run concurrently, every call's task fails with ``Fenced``; the
    loop raised the first and dropped the others unread, so asyncio logged "Task exception
    was never retrieved" with a traceback for each. ``rt.run`` raises ``Fenced`` and nothing
    else is reported."""
    unhandled: list[dict[str, Any]] = []
    outcome: list[str] = []

    async def scenario() -> None:
        unhandled[:] = []
        asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: unhandled.append(ctx))
        entered, fenced = asyncio.Event(), asyncio.Event()

        @stead.tool(effect="read_only")
        async def slow(n: int) -> str:
            """Take until the run is claimed away (not a fixed 0.3 s, within which a loaded
            machine could finish the run before the claim landed)."""
            entered.set()
            await asyncio.wait_for(fenced.wait(), 30)
            return str(n)

        model = ScriptedModel([Reply(tool_calls=[("slow", {"n": i}) for i in range(3)]), "done"])
        agent = stead.Agent("fenced", model, [slow])
        store = f"sqlite:///{DIR / f'fenced-{next(COUNTER)}.db'}"
        async with stead.Runtime(store, agents=[agent]) as rt:
            rid = await rt.start(agent, "go")
            driving = asyncio.ensure_future(rt.run(rid))
            await entered.wait()
            await rt.store.claim(
                rid, owner="someone-else", now=rt.clock(), ttl=30, takeover_from=rt.owner
            )
            fenced.set()
            try:
                await driving
            except stead.Fenced:
                outcome.append("Fenced")

    asyncio.run(scenario())
    import gc

    gc.collect()
    assert outcome == ["Fenced"]
    assert [str(c.get("exception")) for c in unhandled] == []
