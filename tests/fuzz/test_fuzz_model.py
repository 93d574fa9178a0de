"""Model-side fuzzer: arbitrary replies through the real wire server, both formats, the SDKs.

Each example plays a script of ``Turn``s (``_wire.py``) from one HTTP server per module,
through ``AnthropicModel`` or ``OpenAIModel`` (the official SDKs), into a real SQLite store,
with tools of every effect class that count their invocations. After the run it checks what
stead promises whatever the model sends:

* no exception escapes but a ``SteadError``; after one, driving the run again (a bounded
  number of times) brings it to rest; at rest it is completed, failed, cancelled, timed_out
  or awaiting_approval, never running or awaiting_tool with nobody driving it;
* every event reads back (``rt.events``, ``rt.state``, ``rt.get``, a fresh ``Runtime``), and
  the usage it shows is non-negative whole numbers;
* the history is valid (every call one result), idempotency keys are unique per call, no
  ``non_idempotent`` handler ran twice for one call;
* model calls are bounded (``max_turns * max_model_attempts`` plus one per drive); every
  retry wait is bounded; every failure code is a stable one and never ``executor_error``
  (which means stead itself raised); an HTTP refusal gets its status's code, and a 200 that
  is not a stream is ``malformed_result``;
* the ``repeat_threshold``-th identical call in a row is intercepted, rejected calls too.

A failure that is one of the known findings is recorded, not failed (``_fuzz.KNOWN``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fuzz import check, check_loop, fuzz_settings, loop_errors, run_example, timeout_for, violated
from _tools import CONTEXTS, LEDGER, NON_IDEMPOTENT, TOOLS, reset
from _wire import MISSING, Call, FuzzServer, Turn, scripts
from hypothesis import example, given
from hypothesis import strategies as st

import stead
from stead.core.events import (
    AssistantMessageRecorded,
    LoopDetected,
    ModelCallFailed,
    RunFailed,
    ToolCallRequested,
    ToolResultRecorded,
)
from stead.core.failures import MODEL_FAILURE_CODES, code_for_status
from stead.core.states import RunStatus
from stead.errors import SteadError
from stead.providers.anthropic import AnthropicModel
from stead.providers.openai import OpenAIModel
from stead.runtime import Backoff
from stead.testing import assert_valid_history

pytestmark = pytest.mark.fuzz

Script = tuple[tuple[Turn, ...], ...]
REST = {
    RunStatus.COMPLETED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.TIMED_OUT,
    RunStatus.AWAITING_APPROVAL,
}
DRIVES = 4
"""How many times a run that raised is driven again before it must be at rest."""
LONGEST_WAIT = 3600.0
"""No retry wait may be longer than this, whatever ``retry-after`` says."""
DRIVE_TIMEOUT = 30.0

SERVER: FuzzServer | None = None
DIR = Path(tempfile.mkdtemp(prefix="stead-fuzz-model-"))
COUNTER = itertools.count()


@pytest.fixture(scope="module", autouse=True)
def server() -> Iterator[FuzzServer]:
    global SERVER
    with FuzzServer() as srv:
        SERVER = srv
        yield srv
    SERVER = None
    shutil.rmtree(DIR, ignore_errors=True)


class RecordingBackoff(Backoff):
    """The real delay computation, recorded; the sleep itself is kept short for speed."""

    def __init__(self) -> None:
        super().__init__(base=0.001, cap=0.002)
        object.__setattr__(self, "chosen", [])

    def delay(self, attempt: int, retry_after: float | None, rand: random.Random) -> float:
        value = super().delay(attempt, retry_after, rand)
        self.chosen.append((attempt, retry_after, value))  # type: ignore[attr-defined]
        return min(value, 0.002)


limits = st.builds(
    stead.Limits,
    max_turns=st.integers(1, 4),
    max_tool_calls_per_turn=st.sampled_from([1, 2, 64]),
    max_model_attempts=st.integers(1, 3),
    repeat_threshold=st.integers(2, 3),
    cancel_grace=st.just(0.5),
)


# -- which known finding can explain a failure ------------------------------------------------


def _has_surrogate(s: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in s)


def features(kind: str, script: Script) -> set[int]:
    """The known findings this script's input can trigger (by what it contains)."""
    out: set[int] = set()
    seen_ids: set[str] = set()
    for turn in [t for step in script for t in step]:
        if any(_has_surrogate(s) for s in turn.strings()):
            out.add(3)
        if turn.kind != "stream":
            if turn.kind in ("json_200", "raw_200"):
                out.add(11)
            if any(k.startswith("retry-after") for k in turn.headers):
                out.add(6)
            continue
        if any(c.name == "listing" for c in turn.calls):
            out.add(3)
        for v in turn.usage.values():
            number = isinstance(v, int | float) and not isinstance(v, bool)
            if number and (v < 0 or v >= 2**63):
                out.add(2)
            if kind == "openai" and not (isinstance(v, int | float) or v is None):
                out.add(11)
            if kind == "openai" and isinstance(v, float) and not v.is_integer():
                out.add(11)
        ids = [c.id if c.id != MISSING else "None" for c in turn.calls]
        if kind == "openai":
            ids = [
                c.id if c.id not in (MISSING, "") else f"gen{i}" for i, c in enumerate(turn.calls)
            ]
            indexes = [c.index for c in turn.calls]
            if len(set(map(str, indexes))) < len(indexes):
                out.add(1)  # fragments with one index merge into one call
        if len(set(ids)) < len(ids):
            out.add(1)
        if len(turn.calls) > 0:
            out.add(7)
    for step in script:
        ids = {c.id for t in step if t.kind == "stream" for c in t.calls}
        if seen_ids & ids:
            out.add(4)
        seen_ids |= ids
    return out


def blame(candidates: set[int], feats: set[int]) -> int | None:
    """The known finding a violation is blamed on: one that can cause it (``candidates``)
    and that this input can trigger (``feats``); None (a new finding) if there is none."""
    both = sorted(candidates & feats)
    return both[0] if both else None


# -- the property ----------------------------------------------------------------------------


def model_for(kind: str, url: str) -> tuple[Any, Any]:
    """The provider and the SDK client it shares for one example (configured as stead
    configures its own: no SDK retries). One client per example, not per call: a client's
    TLS setup costs a tenth of a second, and a plain-HTTP local server needs none."""
    if kind == "anthropic":
        import anthropic

        client: Any = anthropic.AsyncAnthropic(
            api_key="sk-ant-test",
            base_url=url,
            max_retries=0,
            timeout=10,
            http_client=anthropic.DefaultAsyncHttpxClient(verify=False),
        )
        return AnthropicModel("claude-sonnet-4-6", client=client), client
    import openai

    client = openai.AsyncOpenAI(
        api_key="sk-test",
        base_url=url + "/v1",
        max_retries=0,
        timeout=10,
        http_client=openai.DefaultAsyncHttpxClient(verify=False),
    )
    return OpenAIModel("gpt-4.1", client=client), client


def _remove(n: int) -> None:
    """Each example's SQLite files go when it ends: ``make fuzz`` makes thousands."""
    for path in DIR.glob(f"{n}.db*"):
        path.unlink()


async def play(kind: str, script: Script, lim: stead.Limits) -> None:
    assert SERVER is not None
    srv = SERVER
    reset()
    unhandled = loop_errors()
    srv.play(kind, script)
    feats = features(kind, script)
    model, client = model_for(kind, srv.url)
    n = next(COUNTER)
    try:
        await _play(kind, script, lim, srv, model, feats, unhandled, DIR / f"{n}.db")
    finally:
        await client.close()
        _remove(n)


async def _play(
    kind: str,
    script: Script,
    lim: stead.Limits,
    srv: FuzzServer,
    model: Any,
    feats: set[int],
    unhandled: list[dict[str, Any]],
    path: Path,
) -> None:
    store = f"sqlite:///{path}"
    agent = stead.Agent("fuzz", model, TOOLS, system="fuzz", limits=lim)
    backoff = RecordingBackoff()
    errors: list[BaseException] = []
    async with stead.Runtime(store, agents=[agent], backoff=backoff) as rt:
        rid = await rt.start(agent, "go")
        status: RunStatus | None = None
        for _ in range(DRIVES):
            try:
                view = await asyncio.wait_for(rt.run(rid), DRIVE_TIMEOUT)
            except SteadError as exc:
                errors.append(exc)
                continue
            except TimeoutError:
                violated(f"rt.run did not return in {DRIVE_TIMEOUT}s", blame({6}, feats))
            except Exception as exc:
                cands = {3} if isinstance(exc, UnicodeError) else {2}
                violated(f"rt.run raised {type(exc).__name__}: {exc}"[:500], blame(cands, feats))
            status = view.status
            check(
                status in REST,
                f"rt.run returned with the run {status} (nobody drives it)",
                blame({1}, feats),
            )
            break
        kinds = ", ".join(sorted({f"{type(e).__name__}: {e}"[:160] for e in errors}))
        check(
            status is not None,
            f"the run is not at rest after {DRIVES} drives; every drive raised: {kinds}",
            blame({1, 2, 3}, feats),
        )
        try:
            view = await rt.get(rid)
            state = await rt.state(rid)
            log = await rt.events(rid)
        except Exception as exc:
            violated(
                f"reading the run back raised {type(exc).__name__}: {exc}"[:500],
                blame({2, 3}, feats),
            )
    async with stead.Runtime(store, agents=[agent]) as fresh:
        try:
            again = await fresh.events(rid)
            state2 = await fresh.state(rid)
        except Exception as exc:
            violated(
                f"a fresh Runtime cannot read the run: {type(exc).__name__}: {exc}"[:500],
                blame({2, 3}, feats),
            )
    check([e.seq for e in again] == [e.seq for e in log], "a fresh Runtime reads another log")
    check(state2.status == state.status, "a fresh Runtime folds another status")

    u = view.usage
    numbers = [
        u.input_tokens,
        u.output_tokens,
        u.cache_creation_input_tokens,
        u.cache_read_input_tokens,
    ]
    check(
        all(type(n) is int and 0 <= n < 2**63 for n in numbers),
        f"the run's usage is not non-negative whole numbers: {u}",
        blame({2, 11}, feats),
    )

    try:
        assert_valid_history(state)
    except AssertionError as exc:
        violated(f"invalid history: {exc}")

    events = [e.event for e in log]
    requested = [e for e in events if isinstance(e, ToolCallRequested)]
    keys = Counter(e.idempotency_key for e in requested)
    dup = [k for k, n in keys.items() if n > 1]
    check(not dup, f"two calls share an idempotency key: {dup[:1]}", blame({4, 1}, feats))
    for (_run, name, key), n in LEDGER.items():
        if name in NON_IDEMPOTENT:
            check(
                n <= 1, f"non_idempotent {name} ran {n} times for key {key}", blame({4, 1}, feats)
            )
    for ctx in CONTEXTS:
        check(ctx.run_id == rid, "a handler ran for another run")

    bound = lim.max_turns * lim.max_model_attempts + DRIVES
    check(
        len(srv.requests) <= bound,
        f"{len(srv.requests)} model calls for max_turns={lim.max_turns} x "
        f"max_model_attempts={lim.max_model_attempts} (+{DRIVES} drives)",
        blame({1}, feats),
    )
    for attempt, after, chosen in backoff.chosen:  # type: ignore[attr-defined]
        check(
            chosen <= LONGEST_WAIT,
            f"retry wait of {chosen:.0f}s (retry-after {after}) before attempt {attempt + 1}",
            blame({6}, feats),
        )

    failures = [e for e in events if isinstance(e, ModelCallFailed)]
    for f in failures:
        check(f.code in MODEL_FAILURE_CODES, f"unknown failure code {f.code!r}")
        check(
            f.code != "executor_error",
            f"a model reply made stead itself raise (executor_error): {f.message[:300]}",
            blame({11, 2, 3}, feats),
        )
    outcomes = [e for e in events if isinstance(e, AssistantMessageRecorded | ModelCallFailed)]
    if len(outcomes) == len(srv.requests):
        for turn, outcome in zip(srv.served, outcomes, strict=False):
            _check_code(kind, turn, outcome, feats)

    _check_loops(state, events, lim, feats)
    check_loop(unhandled, collect=False)


def _check_code(kind: str, turn: Turn, outcome: Any, feats: set[int]) -> None:
    got = outcome.code if isinstance(outcome, ModelCallFailed) else "reply"
    if turn.kind == "http_error":
        expected = code_for_status(turn.status)
        body = turn.body if isinstance(turn.body, dict) else {}
        err = body.get("error") if isinstance(body.get("error"), dict) else body
        if kind == "openai" and turn.status == 429 and err.get("code") == "insufficient_quota":
            expected = "billing"
        if expected == "bad_request" and got == "context_length_exceeded":
            return  # the body's text may say so
        check(got == expected, f"HTTP {turn.status} recorded as {got}, not {expected}")
    elif turn.kind in ("json_200", "raw_200"):
        if got == "reply":
            return  # some bytes do make a (tiny) valid stream
        check(
            got == "malformed_result",
            f"a 200 that is not a stream ({turn.kind}) recorded as {got}, not malformed_result",
            blame({11}, feats),
        )


def _check_loops(state: Any, events: list[Any], lim: stead.Limits, feats: set[int]) -> None:
    """The Nth identical call in a row (by name and recorded arguments) is intercepted."""
    looped = {(e.turn_index, e.tool_call_id) for e in events if isinstance(e, LoopDetected)}
    limited = {
        (e.turn_index, e.tool_call_id)
        for e in events
        if isinstance(e, ToolResultRecorded) and e.source == "limit"
    }
    failed_loop = any(isinstance(e, RunFailed) and "loop" in e.code for e in events)
    streak, last = 0, None
    for e in events:
        if not isinstance(e, ToolCallRequested):
            continue
        digest = (e.name, e.arguments)
        streak = streak + 1 if digest == last else 1
        last = digest
        where = (e.turn_index, e.tool_call_id)
        if streak >= lim.repeat_threshold and where not in limited and not failed_loop:
            check(
                where in looped,
                f"call {e.name}({e.arguments[:60]!r}) repeated {streak} times in a row "
                f"(threshold {lim.repeat_threshold}) was not intercepted"
                + (" (it was rejected)" if e.rejection else ""),
                blame({7}, feats) if e.rejection else None,
            )


def _call(call_id: str, name: str, arguments: str) -> Call:
    return Call(call_id, name, (arguments,))


def _tools(*calls: Call) -> Turn:
    return Turn(kind="stream", calls=calls)


LIM = stead.Limits(max_turns=4, max_model_attempts=2, repeat_threshold=2)
KNOWN_EXAMPLES: list[tuple[int, Script]] = [
    # (finding, a script that hits it unfixed): what hypothesis found, written down so every
    # `make test` shows each class whatever the random examples are
    (1, ((_tools(_call("call_0", "lookup", '{"query": "a"}'), _call("call_0", "lookup", "{}")),),)),
    (2, ((Turn(kind="stream", text=("hi",), usage={"output_tokens": -5}),),)),
    (3, ((Turn(kind="stream", text=("\ud800",)),),)),
    (3, ((_tools(_call("c1", "listing", "{}")),),)),
    (3, ((_tools(_call("c1", "refund", '{"amount": 5, "note": "\\ud800"}')),),)),
    (
        4,
        (
            (_tools(_call("call_0", "save", '{"key": "a", "value": 1}')),),
            (_tools(_call("call_0", "save", '{"key": "b", "value": 2}')),),
        ),
    ),
    (
        6,
        (
            (
                Turn(kind="http_error", status=429, headers={"retry-after": "100000"}, body={}),
                Turn(kind="stream", text=("ok",)),
            ),
        ),
    ),
    (7, tuple((_tools(_call(f"c{i}", "nope", "{}")),) for i in range(3))),
    (11, ((Turn(kind="json_200", body={"id": "msg_1", "content": []}),),)),
    (11, ((Turn(kind="stream", text=("x",), usage={"completion_tokens": "ten"}),),)),
]


def _with_known_examples(test: Any) -> Any:
    for _finding, script in KNOWN_EXAMPLES:
        test = example(script=script, lim=LIM)(test)
    return test


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.timeout(timeout_for(240))
@pytest.mark.parametrize("kind", ["anthropic", "openai"])
@fuzz_settings(30)
@_with_known_examples
@given(script=scripts(), lim=limits)
def test_any_model_reply_leaves_a_sound_run(kind: str, script: Script, lim: stead.Limits) -> None:
    run_example(lambda: asyncio.run(play(kind, script, lim)))


def test_the_known_findings_filter_names_real_findings() -> None:
    from _fuzz import KNOWN

    assert set(range(1, 12)) >= KNOWN
    assert json.loads(json.dumps(sorted(KNOWN))) == sorted(KNOWN)


def test_arguments_with_an_escaped_lone_surrogate_can_be_sent_back_to_anthropic() -> None:
    """Found by this fuzzer (a ``refund`` whose note is ``"\\ud800"``, once the store could
    hold it): the recorded arguments are valid JSON, but parsed for the next request's
    ``tool_use`` block they hold a lone surrogate, the SDK cannot encode the body as UTF-8,
    and every later model call of the run was ``executor_error``. Pairs are kept."""
    from stead.core.messages import ToolCall
    from stead.providers._wire_anthropic import tool_input

    call = ToolCall(id="c1", name="refund", arguments='{"note": ["\\ud800", "\\ud83e\\udd8a"]}')
    sent = tool_input(call)
    assert sent == {"note": ["\ufffd", "🦊"]}
    json.dumps(sent, ensure_ascii=False).encode("utf-8")  # what the SDK does with the body
