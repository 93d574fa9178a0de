"""What a hostile client sends a real ``stead serve``: lone surrogates in any JSON string,
``NaN`` and ``Infinity`` literals (Python's JSON parser takes them), numbers beyond what a
store holds, ``Last-Event-ID`` headers that are not a seq of this run. Each is a 4xx with a
JSON body saying what was wrong, never a 500, and never the input echoed back raw."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
from collections.abc import Iterator

import httpx
import pytest
from _agents import build
from _stack import Stack

import stead

WAITING = "run_waiting_for_a_person"
DONE = "run_finished_already"
DAMAGED = "run_with_a_damaged_row"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("hostile")
    store = f"sqlite:///{folder / 'runs.db'}"

    async def prepare() -> None:
        async with stead.Runtime(store, agents=build()) as rt:
            await rt.start("refunds", "refund 42", run_id=WAITING)
            assert (await rt.run(WAITING)).status == stead.RunStatus.AWAITING_APPROVAL
            await rt.start("lookup", "where is 7", run_id=DONE)
            assert (await rt.run(DONE)).status == stead.RunStatus.COMPLETED
            await rt.start("lookup", "where is 8", run_id=DAMAGED)
            assert (await rt.run(DAMAGED)).status == stead.RunStatus.COMPLETED

    asyncio.run(prepare())
    with sqlite3.connect(folder / "runs.db") as db:  # a disk fault, or a careless UPDATE
        db.execute("UPDATE events SET data = '{not json' WHERE run_id = ? AND seq = 2", (DAMAGED,))
    s = Stack(store, folder)
    s.serve()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def api(stack: Stack) -> httpx.Client:
    assert stack.client is not None
    return stack.client


def _refused(r: httpx.Response, status: int, *words: str) -> dict[str, object]:
    assert r.status_code == status, (r.status_code, r.text)
    body = json.loads(r.content.decode("ascii"))  # escaped: any client can read it
    assert isinstance(body, dict) and isinstance(body.get("detail"), str), body
    for word in words:
        assert word in body["detail"], body
    return body


def _raw(api: httpx.Client, path: str, text: str) -> httpx.Response:
    """POST a body as written: JSON escapes and literals a strict encoder never makes."""
    return api.post(path, content=text.encode(), headers={"Content-Type": "application/json"})


APPROVE = f"/runs/{WAITING}/approvals/call_0_0/approve"
DENY = f"/runs/{WAITING}/approvals/call_0_0/deny"
ANSWER = f"/runs/{WAITING}/approvals/call_0_0/answer"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/runs", r'{"agent": "lookup", "input": "\ud800"}'),
        ("/runs", r'{"agent": "look\udfffup", "input": "x"}'),
        ("/runs", r'{"agent": "lookup", "input": "x", "session_id": "\ud83d"}'),
        ("/runs", r'{"agent": "lookup", "input": "x", "correlation_id": "a\udc80"}'),
        ("/runs", r'{"agent": "lookup", "input": "x", "run_id": "\ud800"}'),
        (DENY, r'{"reason": "no \ud800"}'),
        (APPROVE, r'{"token": "\ud800"}'),
        (APPROVE, r'{"reason": "\udc00"}'),
        (APPROVE, r'{"arguments": {"order_id": 42, "cents": 1, "note": "\ud800"}}'),
        (APPROVE, r'{"arguments": {"\ud800": 1}}'),
        (ANSWER, r'{"decision": "skip", "reason": "\ud800"}'),
        (f"/runs/{WAITING}/cancel", r'{"reason": "\ud800"}'),
    ],
)
def test_a_lone_surrogate_in_any_string_is_a_422(api: httpx.Client, path: str, body: str) -> None:
    found = _refused(_raw(api, path, body), 422, "body.")
    problems = found["problems"]
    assert isinstance(problems, list)
    assert all(set(p) == {"loc", "msg", "type"} for p in problems)  # never the value


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/runs", '{"agent": "lookup", "input": NaN}'),
        ("/runs", '{"agent": "lookup", "input": Infinity}'),
        ("/runs", '{"agent": NaN, "input": -Infinity}'),
        (APPROVE, '{"arguments": {"order_id": 42, "cents": NaN}}'),
        (APPROVE, '{"arguments": {"order_id": Infinity, "cents": 1}}'),
        (APPROVE, '{"arguments": {"order_id": 42, "cents": 1e999}}'),
        (APPROVE, '{"arguments": {"order_id": 42, "cents": 99999999999999999999999}}'),
        (APPROVE, '{"reason": NaN}'),
        (DENY, '{"reason": Infinity}'),
    ],
)
def test_non_strict_json_literals_and_huge_numbers_are_a_422(
    api: httpx.Client, path: str, body: str
) -> None:
    _refused(_raw(api, path, body), 422)


def test_the_422_says_where_and_what_never_the_input(api: httpx.Client) -> None:
    secret = "hunter2-" * 10
    r = api.post("/runs", json={"agent": "lookup", "input": {"password": secret}})
    body = _refused(r, 422, "body.input")
    assert secret not in r.text
    assert body["problems"] == [
        {"loc": ["body", "input"], "msg": "Input should be a valid string", "type": "string_type"}
    ]
    # the run waiting for a person is untouched by all of the above
    assert api.get(f"/runs/{WAITING}").json()["status"] == "awaiting_approval"


@pytest.mark.parametrize("after", [2**63, 2**63 - 1 + 1, 10**40, -1])
def test_after_beyond_what_a_store_holds_is_a_4xx(api: httpx.Client, after: int) -> None:
    for accept in ("application/json", "text/event-stream"):
        r = api.get(
            f"/runs/{DONE}/events", params={"after": str(after)}, headers={"Accept": accept}
        )
        assert r.status_code == 422, (after, accept, r.text)


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ("²", "ASCII digits"),
        ("١٢", "ASCII digits"),
        ("1" * 40, "ASCII digits"),
        ("9" * 19, "ASCII digits"),
        ("-1", "ASCII digits"),
        ("", "ASCII digits"),
        ("9999", "beyond the run's log"),
    ],
)
def test_a_last_event_id_that_is_no_seq_of_this_run_is_a_400(
    api: httpx.Client, header: str, words: str
) -> None:
    for accept in ("application/json", "text/event-stream"):
        r = api.get(
            f"/runs/{DONE}/events",
            headers={"Accept": accept, "Last-Event-ID": header.encode()},
        )
        _refused(r, 400, words)


def test_an_after_beyond_the_log_is_a_400_and_the_last_seq_is_not(api: httpx.Client) -> None:
    events = api.get(f"/runs/{DONE}/events").json()
    last = events[-1]["seq"]
    assert api.get(f"/runs/{DONE}/events", params={"after": last}).json() == []
    _refused(api.get(f"/runs/{DONE}/events", params={"after": last + 1}), 400, "beyond")
    with api.stream(
        "GET",
        f"/runs/{DONE}/events",
        headers={"Accept": "text/event-stream", "Last-Event-ID": str(last)},
    ) as stream:
        assert stream.status_code == 200
        text = "".join(stream.iter_text())
    assert "event: end" in text and "event: event" not in text


@pytest.mark.parametrize(
    "cursor",
    [
        '[1e400, "x"]',
        '[NaN, "x"]',
        '[1.0, "\\ud800"]',
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        '[true, "x"]',
    ],
)
def test_a_cursor_this_server_never_gave_is_a_400(api: httpx.Client, cursor: str) -> None:
    encoded = base64.urlsafe_b64encode(cursor.encode()).decode()
    _refused(api.get("/runs", params={"cursor": encoded}), 400, "cursor")


def test_one_damaged_run_does_not_hide_the_others_from_the_list(api: httpx.Client) -> None:
    r = api.get("/runs")
    assert r.status_code == 200, r.text
    runs = {run["run_id"]: run for run in r.json()["runs"]}
    assert set(runs) == {WAITING, DONE, DAMAGED}
    assert runs[DONE]["status"] == "completed" and runs[DONE]["damaged"] is None
    assert runs[WAITING]["status"] == "awaiting_approval"
    assert runs[DAMAGED]["status"] == "completed"  # as its runs row says
    assert f"corrupt event in run {DAMAGED!r} at seq 2" in runs[DAMAGED]["damaged"]
    _refused(api.get(f"/runs/{DAMAGED}"), 503, "at seq 2")  # the run itself names the row
    assert [a["run_id"] for a in api.get("/approvals").json()] == [WAITING]
