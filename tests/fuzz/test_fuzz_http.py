"""HTTP fuzzer: what real clients and attackers send a real ``stead serve``, beyond the strict
JSON the schemathesis run sends.

Bodies are written by hand, not by a JSON encoder: ``NaN``, ``Infinity`` and ``-Infinity``
literals, ``\\ud800`` escapes (lone surrogates), integers of hundreds of digits, floats that
overflow, deep nesting, duplicate keys, text that is not JSON at all, under any content
type. Headers are odd too: ``Last-Event-ID`` as any text (non-ASCII digits, 40 digits,
signs), any ``Accept``, broken ``Authorization``. Query numbers go past 2**63.

The promise: never a 5xx; every 4xx a JSON object with an ``error`` and a ``detail`` text
(ASCII-escaped, so any client can read it); a stream that opens ends with ``event: end``
(the runs streamed are finished); and the run waiting for a person is still waiting for
one unless a request was a well-formed decision.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _fuzz import check, fuzz_settings, run_example, timeout_for, violated
from hypothesis import example, given, reject
from hypothesis import strategies as st

import stead

sys.path.insert(0, str(Path(__file__).parent.parent / "server"))

from _agents import build
from _stack import SECRET, Stack

pytestmark = pytest.mark.fuzz

WAITING = "run_fuzz_waiting"
DONE = "run_fuzz_done"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    folder = tmp_path_factory.mktemp("fuzz-http")
    store = f"sqlite:///{folder / 'runs.db'}"

    async def prepare() -> None:
        async with stead.Runtime(store, agents=build()) as rt:
            await rt.start("refunds", "refund 42", run_id=WAITING)
            await rt.run(WAITING)
            await rt.start("lookup", "where is 7", run_id=DONE)
            await rt.run(DONE)

    asyncio.run(prepare())
    stack = Stack(store, folder)
    stack.serve()
    try:
        with httpx.Client(base_url=stack.url, timeout=30) as bare:  # headers: the example's
            yield bare
    finally:
        stack.close()


# -- what is sent ----------------------------------------------------------------------------

LITERALS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "9" * 400, "-" + "9" * 30]
ESCAPES = [r"\ud800", r"\udfff", r"\ud83d", r"\u0000", r"\ud83d\ude00", "\\\\", r"\""]


@st.composite
def strings(draw: st.DrawFn) -> str:
    """A JSON string literal, as written: plain text, or with escapes a strict encoder of
    valid text never makes."""
    parts = draw(
        st.lists(
            st.one_of(
                st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=8).map(
                    lambda t: json.dumps(t, ensure_ascii=False)[1:-1]
                ),
                st.sampled_from(ESCAPES),
            ),
            max_size=4,
        )
    )
    return '"' + "".join(parts) + '"'


def values(depth: int = 3) -> st.SearchStrategy[str]:
    """Any JSON-ish value, as text."""
    leaves = st.one_of(
        strings(),
        st.sampled_from([*LITERALS, "true", "false", "null", "0", "-0", "1.5", "1e-400"]),
        st.integers(-(2**70), 2**70).map(str),
    )
    if depth == 0:
        return leaves
    inner = values(depth - 1)
    return st.one_of(
        leaves,
        st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(strings(), inner), max_size=3).map(
            lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"
        ),
    )


FIELDS = [
    "agent",
    "input",
    "session_id",
    "correlation_id",
    "run_id",
    "reason",
    "token",
    "arguments",
    "decision",
    "result",
]


@st.composite
def bodies(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(values())
    if kind == 1:
        return draw(st.sampled_from(["", "{", "[" * 5000 + "]" * 5000, "{}" * 3, "\x00", "nul"]))
    pairs = draw(
        st.lists(
            st.tuples(
                st.one_of(st.sampled_from(FIELDS).map(lambda f: f'"{f}"'), strings()), values()
            ),
            max_size=5,
        )
    )
    if draw(st.booleans()):
        pairs.append(('"agent"', '"lookup"'))
    return "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"


ROUTES = [
    ("POST", "/runs"),
    ("POST", f"/runs/{WAITING}/approvals/call_0_0/approve"),
    ("POST", f"/runs/{WAITING}/approvals/call_0_0/deny"),
    ("POST", f"/runs/{WAITING}/approvals/call_0_0/answer"),
    ("POST", f"/runs/{DONE}/cancel"),
    ("POST", f"/runs/{DONE}/resume"),
    ("GET", f"/runs/{DONE}/events"),
    ("GET", f"/runs/{DONE}"),
    ("GET", "/runs"),
    ("GET", "/approvals"),
]

header_text = st.one_of(
    st.sampled_from(["²", "١٢", "7", " 7 ", "-1", "+3", "1" * 40, "9" * 19, "0x10", "", "1e3"]),
    st.integers(0, 2**70).map(str),
    st.text(st.characters(codec="latin-1", exclude_categories=["Cc"]), max_size=12),
)
accepts = st.sampled_from(["application/json", "text/event-stream", "*/*", "text/html", ""])
content_types = st.sampled_from(
    ["application/json", "text/plain", "application/json; charset=latin-1", "", "x/y"]
)
queries = st.dictionaries(
    st.sampled_from(["after", "limit", "cursor", "status", "agent"]),
    st.one_of(
        st.integers(-(2**70), 2**70).map(str),
        st.sampled_from(["NaN", "inf", "1e400", "²", "", "0x1"]),
        st.text(max_size=8),
    ),
    max_size=3,
)
auths = st.sampled_from(["good", "good", "good", "none", "Bearer a b", "Basic x", "Bearer \x7f"])


def _headers(accept: str, ctype: str, last: str | None, auth: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    if accept:
        out["Accept"] = accept.encode()
    if ctype:
        out["Content-Type"] = ctype.encode()
    if last is not None:
        out["Last-Event-ID"] = last.encode()  # raw bytes, as any client may send
    if auth == "good":
        out["Authorization"] = f"Bearer {SECRET}".encode()
    elif auth != "none":
        out["Authorization"] = auth.encode("latin-1")
    return out


def _query(params: dict[str, str]) -> dict[str, str]:
    # httpx encodes what it is given; a lone surrogate is not text a URL can carry at all.
    return {k: v for k, v in params.items() if not any(0xD800 <= ord(c) < 0xE000 for c in v)}


def _send(
    api: httpx.Client,
    route: tuple[str, str],
    body: str,
    headers: dict[str, bytes],
    params: dict[str, str],
) -> None:
    method, path = route
    shown = f"{method} {path} {params!r:.80} {body!r:.120} {headers!r:.160}"
    content = body.encode("utf-8", "surrogatepass") if method == "POST" else None
    try:
        with api.stream(method, path, content=content, headers=headers, params=_query(params)) as r:
            status = r.status_code
            text = r.read()
    except httpx.LocalProtocolError:
        reject()  # this client will not send it (a header h11 calls illegal): no request made
    except httpx.HTTPError as exc:
        violated(f"{shown}: the server broke the connection: {type(exc).__name__}: {exc}")
    check(status < 500, f"{shown}: {status} {text[:300]!r}")
    if 400 <= status < 500:
        try:
            answer = json.loads(text.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            violated(f"{shown}: {status} body is not ASCII JSON: {text[:200]!r}")
        check(
            isinstance(answer, dict) and isinstance(answer.get("detail"), str),
            f"{shown}: {status} body has no detail text: {answer!r:.200}",
        )
    if status == 200 and text.startswith(b"retry:"):
        check(text.rstrip().endswith(b"data: {}"), f"{shown}: the stream ended without end")


@pytest.mark.timeout(timeout_for(240))
@fuzz_settings(80)
@example(
    route=("POST", "/runs"),
    body='{"agent": "lookup", "input": NaN}',
    accept="application/json",
    ctype="application/json",
    last=None,
    auth="good",
    params={},
)
@example(
    route=("GET", f"/runs/{DONE}/events"),
    body="",
    accept="text/event-stream",
    ctype="",
    last="1" * 40,
    auth="good",
    params={},
)
@example(
    route=("GET", f"/runs/{DONE}/events"),
    body="",
    accept="application/json",
    ctype="",
    last=None,
    auth="good",
    params={"after": str(2**63)},
)
@given(
    route=st.sampled_from(ROUTES),
    body=bodies(),
    accept=accepts,
    ctype=content_types,
    last=st.one_of(st.none(), header_text),
    auth=auths,
    params=queries,
)
def test_any_request_is_answered_without_a_5xx_and_with_a_readable_error(
    api: httpx.Client,
    route: tuple[str, str],
    body: str,
    accept: str,
    ctype: str,
    last: str | None,
    auth: str,
    params: dict[str, str],
) -> None:
    headers = _headers(accept, ctype, last, auth)
    run_example(lambda: _send(api, route, body, headers, params))


def test_the_waiting_run_survived_the_fuzzing(api: httpx.Client) -> None:
    # A decision that was well formed may have decided it; nothing else may have broken it.
    r = api.get(f"/runs/{WAITING}", headers={"Authorization": f"Bearer {SECRET}"})
    assert r.status_code == 200 and r.json()["status"] in {s.value for s in stead.RunStatus}
