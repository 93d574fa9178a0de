"""The caller side, fuzzed: hypothesis-built arguments to the public API and to the CLI.

Whatever a program passes to ``Limits``, ``Budget``, ``Agent``, ``Runtime.start``,
``approve`` / ``deny`` / ``decide`` / ``cancel``, or a person types after ``stead``, the
outcome is success or a documented ``SteadError`` (the CLI: exit 0, 1 or 2), never another
exception; and every run in the store still reads back afterwards, so nothing unreadable was
written. Arguments mix valid values with anything (wrong types, huge and negative numbers,
NaN, lone surrogates, control characters, objects JSON cannot carry), so the checks are met
both ways.

``STEAD_FUZZ_EXAMPLES`` sets the examples per property (a small fixed budget by default, so
``make test`` stays fast; ``make fuzz`` runs more).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stead
from stead.cli import main
from stead.core.pricing import PriceTable
from stead.testing import Reply, ScriptedModel

EXAMPLES = int(os.environ.get("STEAD_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)


@stead.tool(effect="non_idempotent", requires_approval=True)
def refund(order_id: int, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents}"


@stead.tool(effect="read_only")
def lookup(order_id: int) -> str:
    """Look an order up."""
    return "shipped"


class Opaque:
    """Something JSON cannot carry and no field takes."""

    def __repr__(self) -> str:
        return "Opaque()"


# Text of every kind: control characters, lone surrogates, markup-looking brackets.
TEXT = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=12),
    st.sampled_from(["", " ", "[/]", "[bold]x", "a\x00b", "\ud800", "\x1b[2J", "x" * 300]),
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 32, 33, 2**63, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
SCALARS = st.one_of(st.none(), NUMBERS, TEXT, st.binary(max_size=4), st.builds(Opaque))
JSONISH = st.recursive(
    st.one_of(st.none(), NUMBERS, TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(TEXT, st.integers(-3, 3)), inner, max_size=3),
    ),
    max_leaves=6,
)
ANYTHING = st.one_of(
    SCALARS,
    JSONISH,
    st.sets(st.integers(0, 3), max_size=2),
    st.tuples(st.integers(), TEXT),
    st.just(lookup),
    st.just([lookup, lookup]),
    st.just(PriceTable()),
    st.just(stead.Limits()),
    st.just(stead.Budget()),
)


def _or(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly anything, often a valid value, so both sides of every check are reached."""
    return st.one_of(valid, ANYTHING)


def _fields(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments: each field present or not."""
    return st.fixed_dictionaries({}, optional={k: _or(v) for k, v in fields.items()})


LIMITS = _fields(
    max_turns=st.integers(1, 100),
    max_tool_calls_per_turn=st.integers(1, 100),
    max_model_attempts=st.integers(1, 10),
    repeat_threshold=st.integers(2, 32),
    approval_timeout=st.one_of(st.none(), st.floats(0.001, 1e6)),
    cancel_grace=st.floats(0, 60),
)
BUDGET = _fields(
    max_input_tokens=st.one_of(st.none(), st.integers(1, 10**9)),
    max_output_tokens=st.one_of(st.none(), st.integers(1, 10**9)),
    max_total_tokens=st.one_of(st.none(), st.integers(1, 10**9)),
    max_usd=st.one_of(st.none(), st.floats(0.01, 1e6)),
)


def _attempt(make: Any) -> object:
    """Call ``make``; a SteadError is an answer, any other exception fails the property."""
    try:
        return make()
    except stead.SteadError as exc:
        str(exc)  # the message itself must be printable
        return exc


@FUZZ
@given(kw=LIMITS)
def test_limits_take_anything(kw: dict[str, Any]) -> None:
    made = _attempt(lambda: stead.Limits(**kw))
    if isinstance(made, stead.Limits):
        for name in ("max_turns", "max_tool_calls_per_turn", "max_model_attempts"):
            value = getattr(made, name)
            assert type(value) is int and value >= 1
        assert made.approval_timeout is None or (
            math.isfinite(made.approval_timeout) and made.approval_timeout > 0
        )
        assert math.isfinite(made.cancel_grace) and made.cancel_grace >= 0


@FUZZ
@given(kw=BUDGET)
def test_budgets_take_anything(kw: dict[str, Any]) -> None:
    made = _attempt(lambda: stead.Budget(**kw))
    if isinstance(made, stead.Budget):
        for name in ("max_input_tokens", "max_output_tokens", "max_total_tokens"):
            value = getattr(made, name)
            assert value is None or (type(value) is int and value >= 1)
        assert made.max_usd is None or (math.isfinite(made.max_usd) and made.max_usd > 0)


MODELS = st.one_of(
    st.builds(lambda: ScriptedModel(["ok"])),
    st.sampled_from(
        ["openai:gpt-4.1", "anthropic:claude-sonnet-4-6", "gemini:x", "openai-compatible:x", ":"]
    ),
    TEXT.map(lambda t: f"openai-compatible:http://127.0.0.1:1/v1:{t}"),
)
AGENT = st.fixed_dictionaries(
    {"name": _or(st.sampled_from(["a", "agent-1"])), "model": _or(MODELS)},
    optional={
        "tools": _or(st.sampled_from([(), [lookup], [lookup, refund], (refund,)])),
        "system": _or(st.just("be brief")),
        "limits": _or(st.just(stead.Limits(max_turns=3))),
        "budget": _or(st.just(stead.Budget(max_usd=1.0))),
        "max_output_tokens": _or(st.integers(1, 4096)),
        "prices": _or(st.just(PriceTable())),
    },
)


@FUZZ
@given(kw=AGENT)
def test_agents_take_anything(kw: dict[str, Any]) -> None:
    made = _attempt(lambda: stead.Agent(**kw))
    if isinstance(made, stead.Agent):
        # everything a run records of its agent can be stored
        for text in (made.name, made.model.model_name, made.system):
            assert isinstance(text, str)
            text.encode("utf-8")


STORES = st.one_of(
    st.sampled_from(
        ["sqlite:///fuzz-ok.db", "", " ", "sqlite://", "sqlite:///", ":memory:", "redis://x"]
    ),
    SCALARS.filter(lambda v: not isinstance(v, str)),  # no stray files from random paths
)
RUNTIME = st.fixed_dictionaries(
    {"store": STORES},
    optional={
        "agents": _or(st.builds(lambda: [stead.Agent("r", ScriptedModel(["ok"]))])),
        "lease_ttl": _or(st.floats(0.1, 60)),
        "snapshot_every": _or(st.integers(1, 1000)),
    },
)


def test_runtimes_take_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the one good URL above is relative
    loop = asyncio.new_event_loop()
    try:

        @FUZZ
        @given(kw=RUNTIME)
        def check(kw: dict[str, Any]) -> None:
            made = _attempt(lambda: stead.Runtime(**kw))
            if isinstance(made, stead.Runtime):
                loop.run_until_complete(made.close())

        check()
    finally:
        loop.close()
    assert all(name.startswith("fuzz-ok.db") for name in os.listdir(tmp_path))


# -- Runtime calls against a real store --------------------------------------------------------


@contextlib.contextmanager
def _runtime(path: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, stead.Runtime, str]]:
    """One event loop and Runtime for all examples (a store per example would be most of the
    cost), with a run waiting on a person to decide about."""
    model = ScriptedModel(
        [Reply(tool_calls=[("refund", {"order_id": 1, "cents": 5})]), "Done."] * 1000
    )
    agent = stead.Agent("gated", model, [refund, lookup])
    loop = asyncio.new_event_loop()
    rt = stead.Runtime(f"sqlite:///{path / 'fuzz.db'}", agents=[agent])

    async def gated() -> str:
        rid = await rt.start(agent, "refund order 1", run_id="run_gated")
        assert (await rt.run(rid)).status == "awaiting_approval"
        return rid

    try:
        yield loop, rt, loop.run_until_complete(gated())
    finally:
        loop.run_until_complete(_all_read_back(rt))
        loop.run_until_complete(rt.close())
        loop.close()


async def _all_read_back(rt: stead.Runtime) -> None:
    """Every run in the store folds from its events: nothing unreadable was written."""
    for record in await rt.store.list_runs(limit=100_000):
        await rt.state(record.run_id)
        await rt.events(record.run_id)


START = st.fixed_dictionaries(
    {"agent": _or(st.just("gated")), "input": _or(st.just("hello"))},
    optional={
        "run_id": _or(st.one_of(st.none(), st.just("run_gated"), st.uuids().map(str))),
        "session_id": _or(st.just("s-1")),
        "correlation_id": _or(st.just("c-1")),
        "config": _or(st.one_of(st.none(), st.just({"k": [1, 2.5, "x"]}))),
    },
)


def test_start_takes_anything(tmp_path: Path) -> None:
    with _runtime(tmp_path) as (loop, rt, _):

        @FUZZ
        @given(kw=START)
        def check(kw: dict[str, Any]) -> None:
            made = _attempt(lambda: loop.run_until_complete(rt.start(**kw)))
            if isinstance(made, str):
                loop.run_until_complete(rt.state(made))

        check()


ARGUMENTS = st.one_of(
    st.none(),
    st.just({"order_id": 1, "cents": 9}),
    st.fixed_dictionaries({"order_id": ANYTHING, "cents": ANYTHING}),
    JSONISH,
    ANYTHING,
)
DECISION = st.fixed_dictionaries(
    {
        "verb": st.sampled_from(["approve", "deny", "decide", "cancel"]),
        "run_id": _or(st.just("run_gated")),
        "tool_call_id": _or(st.just("call_0_0")),
    },
    optional={
        "decision": _or(st.sampled_from(["approve", "deny", "happened", "not_happened", "skip"])),
        "token": _or(st.none()),
        "reason": _or(st.just("no")),
        "result": _or(st.one_of(st.none(), st.just("ok"))),
        "by": _or(st.just("ops")),
        "arguments": ARGUMENTS,
    },
)


def test_decisions_and_cancels_take_anything(tmp_path: Path) -> None:
    with _runtime(tmp_path) as (loop, rt, rid):

        @FUZZ
        @given(kw=DECISION)
        def check(kw: dict[str, Any]) -> None:
            verb = kw.pop("verb")
            run_id, call_id = kw.pop("run_id"), kw.pop("tool_call_id")
            if verb == "approve":
                kw.pop("decision", None)
                call = lambda: rt.approve(run_id, call_id, **kw)  # noqa: E731
            elif verb == "deny":
                kw.pop("decision", None)
                reason = kw.pop("reason", "no")
                call = lambda: rt.deny(run_id, call_id, reason, **kw)  # noqa: E731
            elif verb == "decide":
                decision = kw.pop("decision", "approve")
                call = lambda: rt.decide(run_id, call_id, decision, **kw)  # noqa: E731
            else:
                call = lambda: rt.cancel(  # noqa: E731
                    run_id, **{k: v for k, v in kw.items() if k in ("reason", "by")}
                )
            _attempt(lambda: loop.run_until_complete(call()))
            loop.run_until_complete(rt.state(rid))

        check()


# -- the CLI -----------------------------------------------------------------------------------

AGENT_SPECS = st.sampled_from(
    [
        "nope",
        ":x",
        "x:",
        "no_such_module_at_all:agents",
        "stead.demo._agent:agents",
        "stead.demo._agent:nope",
        "math:pi",
        "math:sqrt",
        "json:loads",
    ]
)
WORDS = st.one_of(TEXT.filter(lambda t: "\x00" not in t), st.sampled_from(["run_gated"]))
CLI_ARGS = st.one_of(
    st.tuples(st.just("runs"), st.just("list")),
    st.tuples(
        st.just("runs"),
        st.just("list"),
        st.sampled_from(["--status", "--limit"]),
        st.one_of(WORDS, NUMBERS.map(str), st.sampled_from(["completed", "queued"])),
    ),
    st.tuples(st.just("runs"), st.sampled_from(["show", "events"]), WORDS),
    st.tuples(st.just("runs"), st.just("events"), WORDS, st.just("--json")),
    st.tuples(st.just("cancel"), WORDS, st.just("--reason"), WORDS),
    st.tuples(st.sampled_from(["approve"]), WORDS, WORDS, st.just("--args"), WORDS),
    st.tuples(st.just("deny"), WORDS, WORDS, st.just("--reason"), WORDS),
    st.tuples(
        st.just("decide"),
        WORDS,
        WORDS,
        st.one_of(WORDS, st.sampled_from(["happened", "not_happened", "skip"])),
    ),
    st.tuples(st.sampled_from(["resume", "approve"]), WORDS, st.just("--agents"), AGENT_SPECS),
    st.tuples(st.just("worker"), st.just("--agents"), AGENT_SPECS, st.just("--grace"), WORDS),
)


def test_the_cli_takes_anything(tmp_path: Path) -> None:
    """In-process ``main(argv)`` (a process per example would cost a second each): exit 0, 1
    or 2, never an exception; ``worker`` only with arguments it refuses before serving."""
    with _runtime(tmp_path):
        store = f"sqlite:///{tmp_path / 'fuzz.db'}"

        @FUZZ
        @given(argv=CLI_ARGS)
        def check(argv: tuple[str, ...]) -> None:
            if argv[0] == "worker" and argv[2] == "stead.demo._agent:agents":
                return  # a worker with good agents serves until SIGTERM
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(["--store", store, *argv])
                except SystemExit as exc:  # argparse refusing (2) or --help (0)
                    code = int(exc.code or 0)
            assert code in (0, 1, 2), (argv, code, err.getvalue())

        check()
