"""A caller's mistake is a ``UserError`` (or ``ApprovalError``) at the call that made it, naming
what to pass, and writes nothing.

Before, each of these escaped as a raw exception (``TypeError``, ``AttributeError``,
``UnicodeEncodeError``), or was accepted and failed later, or wrote a run that could not be
read back.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

import stead
from stead.runtime import Worker
from stead.store import SQLiteStore, open_store
from stead.testing import Reply, ScriptedModel


@stead.tool(effect="non_idempotent", requires_approval=True)
def refund(order_id: int, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents}"


@stead.tool(effect="read_only")
def lookup(order_id: int) -> str:
    """Look an order up."""
    return "shipped"


# -- Limits and Budget -------------------------------------------------------------------------

BAD_LIMITS: list[tuple[dict[str, Any], str]] = [
    ({"max_turns": "10"}, "Limits.max_turns takes an int"),
    ({"max_turns": 10.0}, "Limits.max_turns takes an int"),
    ({"max_turns": True}, "Limits.max_turns takes an int"),
    ({"max_turns": 0}, "Limits.max_turns must be at least 1"),
    ({"max_turns": None}, "Limits.max_turns takes an int"),
    ({"max_tool_calls_per_turn": -1}, "Limits.max_tool_calls_per_turn must be at least 1"),
    ({"max_tool_calls_per_turn": [1]}, "Limits.max_tool_calls_per_turn takes an int"),
    ({"max_model_attempts": "4"}, "Limits.max_model_attempts takes an int"),
    ({"repeat_threshold": 1}, "Limits.repeat_threshold must be at least 2"),
    ({"repeat_threshold": 33}, "Limits.repeat_threshold must be between 2 and 32"),
    ({"repeat_threshold": 2.5}, "Limits.repeat_threshold takes an int"),
    ({"approval_timeout": "1h"}, "Limits.approval_timeout takes a number of seconds"),
    ({"approval_timeout": 0}, "Limits.approval_timeout must be a finite number"),
    ({"approval_timeout": math.inf}, "None waits forever"),
    ({"approval_timeout": math.nan}, "Limits.approval_timeout must be a finite number"),
    ({"cancel_grace": -1}, "Limits.cancel_grace must be a finite number of seconds, zero or"),
    ({"cancel_grace": "5"}, "Limits.cancel_grace takes a number of seconds"),
    ({"cancel_grace": math.nan}, "Limits.cancel_grace must be a finite number"),
]


@pytest.mark.parametrize(("kw", "words"), BAD_LIMITS)
def test_limits_refuse_wrong_types_and_ranges(kw: dict[str, Any], words: str) -> None:
    with pytest.raises(stead.UserError, match=words):
        stead.Limits(**kw)


BAD_BUDGETS: list[tuple[dict[str, Any], str]] = [
    ({"max_total_tokens": -5}, "Budget.max_total_tokens must be at least 1"),
    ({"max_total_tokens": 0}, "Budget.max_total_tokens must be at least 1"),
    ({"max_input_tokens": "1000"}, "Budget.max_input_tokens takes an int"),
    ({"max_output_tokens": 1.5}, "Budget.max_output_tokens takes an int"),
    ({"max_output_tokens": False}, "Budget.max_output_tokens takes an int"),
    ({"max_usd": "1"}, "Budget.max_usd takes a number of dollars"),
    ({"max_usd": -1.0}, "Budget.max_usd must be a finite positive number"),
    ({"max_usd": math.inf}, "Budget.max_usd must be a finite positive number"),
    ({"max_usd": math.nan}, "Budget.max_usd must be a finite positive number"),
]


@pytest.mark.parametrize(("kw", "words"), BAD_BUDGETS)
def test_budgets_refuse_wrong_types_and_ranges(kw: dict[str, Any], words: str) -> None:
    with pytest.raises(stead.UserError, match=words):
        stead.Budget(**kw)


def test_good_limits_and_budgets_still_work() -> None:
    stead.Limits(max_turns=1, approval_timeout=3600, cancel_grace=0)
    stead.Limits(approval_timeout=0.5, cancel_grace=2.5, repeat_threshold=32)
    stead.Budget(max_total_tokens=1, max_usd=1)
    stead.Budget(max_input_tokens=10**12, max_usd=0.01)


def test_a_huge_value_does_not_break_the_message() -> None:
    """An int too long to print (Python refuses str() of 5000 digits) still gives the error."""
    with pytest.raises(stead.UserError, match=r"Limits\.max_turns must be at least 1"):
        stead.Limits(max_turns=-(10**5000))


# -- Agent and tools ---------------------------------------------------------------------------


def _model() -> ScriptedModel:
    return ScriptedModel(["ok"])


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"tools": lookup}, r"not one tool; pass tools=\[lookup\]"),
        ({"tools": 5}, "tools takes a list of @tool functions, not int"),
        ({"tools": "lookup"}, "tools takes a list of @tool functions, not str"),
        ({"tools": {"lookup": lookup}}, "not dict"),
        ({"tools": [lookup, lookup]}, "two tools are named 'lookup'"),
        ({"tools": [lookup, print]}, "is not a tool; decorate the function with @tool"),
        ({"tools": [lookup, None]}, "None is not a tool"),
        ({"system": 3}, "system must be a str"),
        ({"system": "\ud800"}, "lone surrogate"),
        ({"limits": {"max_turns": 3}}, r"limits takes a stead.Limits\(...\)"),
        ({"budget": 100}, r"budget takes a stead.Budget\(...\)"),
        ({"prices": {}}, r"prices takes a stead.PriceTable\(...\)"),
        ({"max_output_tokens": 0}, "max_output_tokens takes an int of at least 1"),
        ({"max_output_tokens": "100"}, "max_output_tokens takes an int"),
    ],
)
def test_agent_refuses_wrong_arguments(kw: dict[str, Any], words: str) -> None:
    with pytest.raises(stead.UserError, match=words):
        stead.Agent("x", _model(), **kw)


@pytest.mark.parametrize("name", ["", None, 5, "a\nb", "a\x00b", "\ud800"])
def test_agent_names_are_plain_text(name: Any) -> None:
    with pytest.raises(stead.UserError):
        stead.Agent(name, _model())


def test_tools_as_any_iterable_still_work() -> None:
    assert stead.Agent("x", _model(), (t for t in [lookup, refund])).registry.names() == [
        "lookup",
        "refund",
    ]


# -- Runtime.start -----------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"input": {"not": "str"}}, "the run's input must be a str, not dict"),
        ({"input": None}, "the run's input must be a str, not NoneType"),
        ({"input": b"bytes"}, "the run's input must be a str, not bytes"),
        ({"input": "bad \ud800 text"}, "lone surrogate at index 4"),
        ({"input": "x", "run_id": 5}, "run_id must be a str, not int"),
        ({"input": "x", "run_id": ""}, "run_id must not be empty"),
        ({"input": "x", "run_id": "a\x00b"}, "run_id must not hold control characters"),
        ({"input": "x", "session_id": None}, "session_id must be a str"),
        ({"input": "x", "session_id": ["s"]}, "session_id must be a str"),
        ({"input": "x", "correlation_id": 7}, "correlation_id must be a str"),
        ({"input": "x", "config": "limits"}, "config must be a dict"),
        ({"input": "x", "config": {"a": math.nan}}, "config must hold only JSON"),
        ({"input": "x", "config": {1: "a"}}, "config must hold only JSON"),
        ({"input": "x", "config": {"a": object()}}, "config must hold only JSON"),
    ],
)
async def test_start_refuses_wrong_arguments_and_writes_nothing(
    store: str, kw: dict[str, Any], words: str
) -> None:
    agent = stead.Agent("a", _model())
    async with stead.Runtime(store, agents=[agent]) as rt:
        with pytest.raises(stead.UserError, match=words):
            await rt.start(agent, **kw)
        assert await rt.store.list_runs() == []


async def test_start_refuses_what_is_not_an_agent(store: str) -> None:
    async with stead.Runtime(store) as rt:
        with pytest.raises(stead.UserError, match="takes an Agent or the name"):
            await rt.start(["a"], "x")  # type: ignore[arg-type]
        with pytest.raises(stead.UnknownAgent):
            await rt.start("nobody", "x")
        assert await rt.store.list_runs() == []


async def test_a_cyclic_config_is_refused(store: str) -> None:
    config: dict[str, Any] = {}
    config["self"] = config
    agent = stead.Agent("a", _model())
    async with stead.Runtime(store, agents=[agent]) as rt:
        with pytest.raises(stead.UserError, match="config must hold only JSON"):
            await rt.start(agent, "x", config=config)


# -- approve / deny / decide / cancel ----------------------------------------------------------


async def _awaiting(rt: stead.Runtime, agent: stead.Agent) -> str:
    rid = await rt.start(agent, "refund order 1", run_id="run_gated")
    view = await rt.run(rid)
    assert view.status == "awaiting_approval"
    return rid


def _gated() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 1, "cents": 5})]), "Done."])
    return stead.Agent("gated", model, [refund])


class Opaque:
    pass


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"order_id": 1, "cents": Opaque()}, "edited arguments must hold only JSON"),
        ({"order_id": 1, "cents": math.nan}, "edited arguments must hold only JSON"),
        ({"order_id": 1, 2: 3}, "edited arguments must hold only JSON"),
        ([1, 2], "edited arguments are a dict"),
        (5, "edited arguments are a dict"),
        ({1, 2}, "edited arguments are a dict"),
        ('{"order_id": 1, "cents": NaN}', "do not fit the tool"),
        ("[1]", "must be a JSON object"),
        ("{not json", "not valid JSON"),
        ({"order_id": "one", "cents": 5}, "do not fit the tool"),
        ("\ud800", "lone surrogate"),
    ],
)
async def test_odd_edited_arguments_are_an_approval_error(
    store: str, arguments: Any, words: str
) -> None:
    agent = _gated()
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await _awaiting(rt, agent)
        seq = (await rt.state(rid)).seq
        with pytest.raises(stead.UserError, match=words):
            await rt.approve(rid, "call_0_0", arguments=arguments)
        assert (await rt.state(rid)).seq == seq  # nothing written
        await rt.approve(rid, "call_0_0", arguments={"order_id": 1, "cents": 7})
        assert (await rt.run(rid)).output == "Done."
        assert "refunded 7" in (await rt.state(rid)).messages[2].content


@pytest.mark.parametrize(
    ("call", "words"),
    [
        ({"decision": "maybe"}, "decision must be one of approve, deny"),
        ({"decision": ["approve"]}, "decision must be one of"),
        ({"decision": "approve", "token": 5}, "token must be a str"),
        ({"decision": "approve", "by": None}, "by must be a str"),
        ({"decision": "deny", "reason": 3}, "reason must be a str"),
        ({"decision": "approve", "result": 1}, "result must be a str"),
        ({"decision": "approve", "tool_call_id": 0}, "tool_call_id must be a str"),
        ({"decision": "approve", "tool_call_id": ""}, "tool_call_id must not be empty"),
    ],
)
async def test_odd_decisions_are_refused_and_write_nothing(
    store: str, call: dict[str, Any], words: str
) -> None:
    agent = _gated()
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await _awaiting(rt, agent)
        seq = (await rt.state(rid)).seq
        call_id = call.pop("tool_call_id", "call_0_0")
        with pytest.raises(stead.UserError, match=words):
            await rt.decide(rid, call_id, **call)
        assert (await rt.state(rid)).seq == seq


async def test_odd_cancels_are_refused(store: str) -> None:
    agent = stead.Agent("a", _model())
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "x")
        for kw, words in (
            ({"reason": None}, "reason must be a str"),
            ({"reason": "r", "by": 5}, "by must be a str"),
        ):
            with pytest.raises(stead.UserError, match=words):
                await rt.cancel(rid, **kw)
        with pytest.raises(stead.UserError, match="run_id must be a str"):
            await rt.cancel(None)  # type: ignore[arg-type]
        assert (await rt.state(rid)).seq == 1


# -- store URLs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("", "the store URL is empty"),
        ("   ", "the store URL is empty"),
        ("sqlite:///", "names no file"),
        ("sqlite://", "bad SQLite URL"),
        ("sqlite:", "bad SQLite URL"),
        ("sqlite://relative.db", "bad SQLite URL"),
        (":memory:", "in-memory database"),
        ("sqlite:///:memory:", "in-memory database"),
        ("redis://localhost/0", "unsupported store 'redis'"),
        ("mysql://u:secret@h/db", "unsupported store 'mysql'"),
        ("postgres:host/db", "unsupported store 'postgres'"),
        ("a\x00b.db", "NUL"),
        ("\ud800.db", "UTF-8"),
    ],
)
def test_store_urls_that_name_no_shared_file_are_refused(
    url: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(stead.UserError, match=words) as caught:
        open_store(url)
    assert "sqlite:///" in str(caught.value) or "NUL" in words or "UTF-8" in words
    assert "secret" not in str(caught.value)
    with pytest.raises(stead.UserError, match=words):
        stead.Runtime(url)
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_a_folder_or_a_non_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(stead.UserError, match="is a folder; name a file in it"):
        open_store(f"sqlite:///{tmp_path}")
    with pytest.raises(stead.UserError, match="is a folder"):
        open_store(tmp_path)
    with pytest.raises(stead.UserError, match="a store URL is a str or a Path"):
        open_store(5)  # type: ignore[arg-type]
    with pytest.raises(stead.UserError, match="Runtime needs a store URL"):
        stead.Runtime(None)  # type: ignore[arg-type]


def test_sqlite_store_refuses_an_empty_path() -> None:
    with pytest.raises(stead.UserError, match="stead needs a file"):
        SQLiteStore("")
    with pytest.raises(stead.UserError, match="stead needs a file"):
        SQLiteStore(":memory:")


async def test_good_store_urls_still_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("sqlite:///rel.db", f"sqlite:///{tmp_path}/abs.db", "bare.db", tmp_path / "p.db"):
        store = open_store(url)
        await store.close()
    names = sorted(name for name in os.listdir(tmp_path) if name.endswith(".db"))
    assert names == ["abs.db", "bare.db", "p.db", "rel.db"]


# -- Runtime and Worker ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"agents": "AGENT"}, "not one Agent; pass agents=\\[agent\\]"),
        ({"agents": 5}, "agents takes a list of Agents, not int"),
        ({"agents": "name"}, "agents takes a list of Agents, not str"),
        ({"agents": [5]}, "int is not one"),
        ({"lease_ttl": 0}, "lease_ttl must be a finite number of seconds above zero"),
        ({"lease_ttl": math.nan}, "lease_ttl must be a finite number"),
        ({"lease_ttl": 10**400}, "lease_ttl must be a finite number"),
        ({"lease_ttl": "30"}, "lease_ttl takes a number of seconds, not str"),
        ({"snapshot_every": 0}, "snapshot_every must be at least 1"),
        ({"snapshot_every": 1.5}, "snapshot_every takes an int"),
    ],
)
def test_runtime_refuses_wrong_arguments_before_opening_the_store(
    tmp_path: Path, kw: dict[str, Any], words: str
) -> None:
    if kw.get("agents") == "AGENT":
        kw["agents"] = stead.Agent("a", _model())
    with pytest.raises(stead.UserError, match=words):
        stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", **kw)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"concurrency": "4"}, "concurrency takes an int"),
        ({"poll_interval": -1}, "poll_interval must be a finite number of seconds above zero"),
        ({"grace": -1}, "grace must be a finite number of seconds zero or more"),
        ({"approval_sweep": math.inf}, "approval_sweep must be a finite number"),
    ],
)
def test_worker_refuses_wrong_arguments(tmp_path: Path, kw: dict[str, Any], words: str) -> None:
    with pytest.raises(stead.UserError, match=words):
        Worker(f"sqlite:///{tmp_path / 'runs.db'}", [stead.Agent("a", _model())], **kw)
    Worker(f"sqlite:///{tmp_path / 'ok.db'}", [stead.Agent("a", _model())], grace=0)


def test_a_store_path_too_long_for_the_file_system_is_a_user_error(tmp_path: Path) -> None:
    """Found by the caller fuzzer: a raw OSError (File name too long) escaped."""
    with pytest.raises(stead.UserError, match="name a file"):
        stead.Runtime(str(tmp_path / ("x" * 5000)))
    assert list(tmp_path.iterdir()) == []


async def test_events_after_something_that_is_not_a_sequence_is_a_user_error(
    tmp_path: Path,
) -> None:
    """Found by the caller fuzzer: ``after=None`` raised a TypeError from the store."""
    async with stead.Runtime(f"sqlite:///{tmp_path}/r.db") as rt:
        for bad in (None, -1, "3", True, 1.5):
            with pytest.raises(stead.UserError, match="sequence number"):
                await rt.events("run_x", after=bad)  # type: ignore[arg-type]
