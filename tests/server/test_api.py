"""The HTTP API against a real ``stead serve`` and a real ``stead worker`` process, on SQLite
and on PostgreSQL: every route, every error status, tokens, body limits, the live stream
resumed with Last-Event-ID, approvals recorded with who decided."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _stack import HERE, SECRET, Stack, _env, group_gone, sse_messages, tool_group, wait_for

import stead
from _wait import until
from stead.cli import main

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("api")
    if request.param == "sqlite":
        store = f"sqlite:///{folder / 'runs.db'}"
    else:
        store = request.getfixturevalue("module_pg_url")
    s = Stack(store, folder)
    s.serve()
    s.worker()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def api(stack: Stack) -> httpx.Client:
    assert stack.client is not None
    return stack.client


def _start(api: httpx.Client, agent: str, text: str = "go", **kw: str) -> str:
    r = api.post("/runs", json={"agent": agent, "input": text, **kw})
    assert r.status_code == 201, r.text
    # The view is read after the create commits, and a worker in another process may have
    # claimed the run in between (PostgreSQL wakes it with a notice): queued, already on, or
    # on a fast machine already finished (a scripted model answers at once); the test that
    # started it waits for the status it expects.
    assert r.json()["status"] in {s.value for s in stead.RunStatus}
    assert r.json()["seq"] >= 1
    return str(r.json()["run_id"])


def _events(api: httpx.Client, run_id: str) -> list[dict]:
    r = api.get(f"/runs/{run_id}/events")
    assert r.status_code == 200, r.text
    return list(r.json())


def _approval_token(store: str, run_id: str) -> str:
    async def read() -> str:
        async with stead.Runtime(store) as rt:
            (pending,) = (await rt.state(run_id)).approvals.values()
            return pending.token

    return asyncio.run(read())


# -- tokens --------------------------------------------------------------------------------


def test_health_needs_no_token_and_every_other_route_needs_a_valid_one(stack: Stack) -> None:
    assert httpx.get(f"{stack.url}/health").json() == {"ok": True}
    spec = httpx.get(f"{stack.url}/openapi.json").json()
    checked = 0
    anonymous = httpx.Client(timeout=20)
    for path, ops in spec["paths"].items():
        url = stack.url + path.replace("{run_id}", "run_x").replace("{call_id}", "call_x")
        for method in ops:
            for headers in (
                {},
                {"Authorization": "Bearer wrong-token-of-some-length"},
                {"Authorization": f"Basic {SECRET}"},
                {"Authorization": f"Bearer {SECRET}x"},
            ):
                r = anonymous.request(method, url, headers=headers, json={})
                if path == "/health":
                    assert r.status_code == 200
                    continue
                assert r.status_code == 401, (method, path, headers, r.text)
                assert r.json()["error"] == "Unauthorized"
                assert r.headers["www-authenticate"] == "Bearer"
            checked += 1
    anonymous.close()
    assert checked >= 14  # every operation of the document


# -- a run's life --------------------------------------------------------------------------


def test_create_drive_and_read_a_run(api: httpx.Client) -> None:
    run_id = _start(api, "lookup", "Where is order 7?", session_id="conv-1")
    run = wait_for(api, run_id, "completed")
    assert run["output"] == "Order 7 has shipped."
    assert (
        run["turns"] == 2 and run["session_id"] == "conv-1" and run["input"] == "Where is order 7?"
    )
    assert run["path"][0] == "queued" and run["path"][-1] == "completed"
    assert run["usage"]["input_tokens"] > 0
    assert run["data"] is None  # a text answer has no structured output
    kinds = [e["kind"] for e in _events(api, run_id)]
    assert kinds[0] == "run_created" and kinds[-1] == "run_completed"
    assert "tool_result_recorded" in kinds
    tail = api.get(f"/runs/{run_id}/events", params={"after": len(kinds) - 1}).json()
    assert [e["kind"] for e in tail] == ["run_completed"]
    roles = [m["role"] for m in api.get(f"/runs/{run_id}/messages").json()]
    assert roles == ["user", "assistant", "tool", "assistant"]
    listed = api.get("/runs", params={"status": "completed", "agent": "lookup"}).json()
    assert run_id in [r["run_id"] for r in listed["runs"]]
    assert all(r["status"] == "completed" for r in listed["runs"])
    other = api.get("/runs", params={"agent": "refunds"}).json()
    assert run_id not in [r["run_id"] for r in other["runs"]]


def test_a_run_forked_over_http_carries_its_history_and_names_its_source(
    api: httpx.Client,
) -> None:
    source = wait_for(api, _start(api, "lookup", "Where is order 7?"), "completed")
    r = api.post(f"/runs/{source['run_id']}/fork", json={"at_turn": 0, "input": "And order 8?"})
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["run_id"] != source["run_id"]
    kinds = [(e["kind"], e["data"]) for e in _events(api, fork["run_id"])]
    assert kinds[1] == (
        "run_forked",
        {"source_run_id": source["run_id"], "at_turn": 0, "carried_results": 1},
    )
    done = wait_for(api, fork["run_id"], "completed")
    roles = [m["role"] for m in api.get(f"/runs/{done['run_id']}/messages").json()]
    assert roles[:4] == ["user", "assistant", "tool", "user"]  # carried, then the new input
    bad = api.post(f"/runs/{source['run_id']}/fork", json={"at_turn": 9, "input": "x"})
    assert bad.status_code == 400 and "turns 0 to" in bad.text
    given = [
        {"role": "assistant", "text": "Order 7 is late."},
        {"role": "user", "content": "And order 8?"},
    ]
    r = api.post(f"/runs/{source['run_id']}/fork", json={"at_turn": 0, "messages": given})
    assert r.status_code == 201, r.text
    said = [m["data"].get("text") for m in api.get(f"/runs/{r.json()['run_id']}/messages").json()]
    assert "Order 7 is late." in said  # the given reply is the fork's history
    for body, says in [
        ({"at_turn": 0, "messages": [{"role": "assistant", "text": "x"}]}, "user message"),
        ({"at_turn": 0, "messages": [{"role": "user"}]}, "messages[0]"),
        ({"at_turn": 0}, "one of them"),
    ]:
        bad = api.post(f"/runs/{source['run_id']}/fork", json=body)
        assert bad.status_code == 400 and says in bad.text, (body, bad.text)


def test_a_structured_answer_is_the_run_details_data(api: httpx.Client) -> None:
    run = wait_for(api, _start(api, "typed", "Where is the Eiffel tower?"), "completed")
    assert run["data"] == {"city": "Paris", "zip": "75007"}


def test_agents_and_the_state_machine(api: httpx.Client) -> None:
    agents = {a["name"]: a for a in api.get("/agents").json()}
    assert {"refunds", "lookup", "streamer", "sleeper", "charger"} <= set(agents)
    (refund,) = agents["refunds"]["tools"]
    assert refund["effect_class"] == "non_idempotent" and refund["requires_approval"]
    assert refund["parameters"]["properties"]["cents"] == {"type": "integer"}
    states = api.get("/states").json()
    assert ["queued", "running"] in states["transitions"]
    assert ["completed", "queued"] not in states["transitions"]
    assert states["mermaid"].startswith("stateDiagram-v2")


def test_list_pages_by_cursor_without_repeats_or_holes(api: httpx.Client) -> None:
    made = [_start(api, "lookup") for _ in range(3)]
    for run_id in made:
        wait_for(api, run_id, "completed")
    everything = api.get("/runs", params={"agent": "lookup", "limit": 200}).json()["runs"]
    seen: list[str] = []
    cursor = None
    while True:
        params = {"agent": "lookup", "limit": 1, **({"cursor": cursor} if cursor else {})}
        page = api.get("/runs", params=params).json()
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [r["run_id"] for r in everything]
    assert set(made) <= set(seen) and len(seen) == len(set(seen))


def test_approve_a_gated_refund_records_who_and_never_shows_the_token(
    stack: Stack, api: httpx.Client
) -> None:
    run_id = _start(api, "refunds")
    run = wait_for(api, run_id, "awaiting_approval")
    (pending,) = run["approvals"]
    assert pending["tool"] == "refund" and pending["effect_class"] == "non_idempotent"
    assert pending["parameters"]["required"] == ["order_id", "cents"]
    inbox = api.get("/approvals").json()
    assert run_id in [a["run_id"] for a in inbox]
    secret = _approval_token(stack.store, run_id)
    for path in ("/approvals", "/runs", f"/runs/{run_id}", f"/runs/{run_id}/events"):
        assert secret not in api.get(path).text, path
    messages = api.get(f"/runs/{run_id}/messages").text
    assert secret not in messages
    r = api.post(f"/runs/{run_id}/approvals/{pending['tool_call_id']}/approve", json={})
    assert r.status_code == 200, r.text
    done = wait_for(api, run_id, "completed")
    assert done["output"] == "Refunded order 42."
    decided = [e for e in _events(api, run_id) if e["kind"] == "approval_decided"]
    assert decided[0]["data"]["by"] == "alice"  # the token's name, not anything the body said
    assert secret not in stack.log.read_text() and SECRET not in stack.log.read_text()
    results = [e for e in _events(api, run_id) if e["kind"] == "tool_result_recorded"]
    assert json.loads(results[0]["data"]["content"])["refunded"] == 25_000


def test_edited_arguments_are_checked_against_the_tool_schema(api: httpx.Client) -> None:
    run_id = _start(api, "refunds")
    call = wait_for(api, run_id, "awaiting_approval")["approvals"][0]["tool_call_id"]
    bad = api.post(
        f"/runs/{run_id}/approvals/{call}/approve", json={"arguments": {"order_id": "forty"}}
    )
    assert bad.status_code == 409
    assert bad.json()["error"] == "ApprovalError"
    assert "the edited arguments do not fit the tool" in bad.json()["detail"]
    ok = api.post(
        f"/runs/{run_id}/approvals/{call}/approve",
        json={"arguments": {"order_id": 42, "cents": 5_000}},
    )
    assert ok.status_code == 200, ok.text
    wait_for(api, run_id, "completed")
    results = [e for e in _events(api, run_id) if e["kind"] == "tool_result_recorded"]
    assert json.loads(results[0]["data"]["content"])["refunded"] == 5_000


def test_deny_with_a_reason_the_model_reads(api: httpx.Client) -> None:
    run_id = _start(api, "refunds")
    call = wait_for(api, run_id, "awaiting_approval")["approvals"][0]["tool_call_id"]
    wrong = api.post(
        f"/runs/{run_id}/approvals/{call}/deny",
        json={"reason": "no", "token": "not-the-approval-token"},
    )
    assert wrong.status_code == 409 and "token does not match" in wrong.json()["detail"]
    r = api.post(f"/runs/{run_id}/approvals/{call}/deny", json={"reason": "too large"})
    assert r.status_code == 200, r.text
    wait_for(api, run_id, "completed")
    (result,) = [e for e in _events(api, run_id) if e["kind"] == "tool_result_recorded"]
    assert result["data"]["is_error"] and "too large" in result["data"]["content"]
    again = api.post(f"/runs/{run_id}/approvals/{call}/deny", json={"reason": "twice"})
    assert again.status_code == 409 and again.json()["error"] == "ApprovalError"


def test_cancel_stops_the_tool_process_group_and_resume_finishes(
    stack: Stack, api: httpx.Client
) -> None:
    run_id = _start(api, "sleeper")
    pidfile = Path(stack.piddir) / run_id
    pgid = tool_group(pidfile)
    os.killpg(pgid, 0)  # alive
    r = api.post(f"/runs/{run_id}/cancel", json={"reason": "taking too long"})
    assert r.status_code == 200, r.text
    run = wait_for(api, run_id, "cancelled")
    assert "taking too long" in json.dumps(run["error"])
    until(lambda: group_gone(pgid), "sleep 60 gone after the cancel", timeout=10)
    r = api.post(f"/runs/{run_id}/resume", json={})
    assert r.status_code == 200, r.text
    # The reply reads the run back after the resume is recorded; a worker woken by it may
    # already hold the run by then, so the path, not the status, shows what the resume did.
    path = r.json()["path"]
    assert path[path.index("cancelled") + 1] == "queued", r.text
    assert wait_for(api, run_id, "completed")["output"] == "Woke up."


def test_answer_the_question_a_dead_worker_left(tmp_path: Path) -> None:
    """A worker dies while a charge is in flight: nothing can tell whether it went through, so
    a person is asked; the answer, given over the API, settles the call without rerunning it."""
    s = Stack(f"sqlite:///{tmp_path / 'runs.db'}", tmp_path)
    try:
        s.serve()
        assert s.client is not None
        run_id = _start(s.client, "charger")
        env = {**_env(tmp_path), "STEAD_CRASH_AT": "after_tool_started:charge_card"}
        child = subprocess.run(
            [sys.executable, str(HERE / "_crash_child.py"), s.store, run_id],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert child.returncode == -signal.SIGKILL, child.stderr
        s.worker()  # claims the run once the dead worker's 1 s lease lapses
        run = wait_for(s.client, run_id, "awaiting_approval")
        (question,) = s.client.get("/approvals").json()
        assert question["reason"] == "outcome_unknown" and question["tool"] == "charge_card"
        assert question["run_id"] == run_id == run["approvals"][0]["run_id"]
        wrong = s.client.post(
            f"/runs/{run_id}/approvals/{question['tool_call_id']}/approve", json={}
        )
        assert wrong.status_code == 409, wrong.text  # it is a question, not a gate
        r = s.client.post(
            f"/runs/{run_id}/approvals/{question['tool_call_id']}/answer",
            json={"decision": "happened", "result": '{"charged": 500, "receipt": "R-1"}'},
        )
        assert r.status_code == 200, r.text
        assert wait_for(s.client, run_id, "completed")["output"] == "Charged."
        events = _events(s.client, run_id)
        (result,) = [e for e in events if e["kind"] == "tool_result_recorded"]
        assert "R-1" in result["data"]["content"]  # the person's answer, not a second charge
        assert [e["kind"] for e in events].count("tool_call_started") == 1
        decided = [e for e in events if e["kind"] == "approval_decided"]
        assert decided[0]["data"]["by"] == "alice"
    finally:
        s.close()


# -- the live stream -----------------------------------------------------------------------


def test_stream_resumed_with_last_event_id_misses_no_durable_event(api: httpx.Client) -> None:
    run_id = _start(api, "streamer")
    got: list[int] = []
    sse = {"Accept": "text/event-stream"}
    with api.stream("GET", f"/runs/{run_id}/events", headers=sse) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for msg in sse_messages(r.iter_lines()):
            if msg.get("event") == "event":
                got.append(int(msg["id"]))
                assert json.loads(msg["data"])["seq"] == got[-1]
            if len(got) == 3:
                break  # the client goes away mid-run
    time.sleep(0.5)  # the run goes on appending meanwhile
    kinds = []
    headers = {**sse, "Last-Event-ID": str(got[-1])}
    with api.stream("GET", f"/runs/{run_id}/events", headers=headers) as r:
        for msg in sse_messages(r.iter_lines()):
            if msg.get("event") == "event":
                got.append(int(msg["id"]))
                kinds.append(json.loads(msg["data"])["kind"])
            # The worker's provisional text may come (it shares it through the store), but
            # never as a durable event: no id to resume from.
            if msg.get("event") == "progress":
                assert "id" not in msg
            if msg.get("event") == "end":
                break
    assert kinds[-1] == "run_completed"
    assert got == list(range(1, len(got) + 1))
    assert got == [e["seq"] for e in _events(api, run_id)]


def test_stream_sends_heartbeats_and_follows_a_decision_made_elsewhere(
    api: httpx.Client,
) -> None:
    run_id = _start(api, "refunds")
    call = wait_for(api, run_id, "awaiting_approval")["approvals"][0]["tool_call_id"]
    kinds: list[str] = []
    beats = 0
    sse = {"Accept": "text/event-stream"}
    with (
        httpx.Client(base_url=str(api.base_url), headers=api.headers, timeout=20) as other,
        api.stream("GET", f"/runs/{run_id}/events", headers=sse) as r,
    ):
        for msg in sse_messages(r.iter_lines()):
            if msg.get("comment") == "heartbeat":
                beats += 1
                if beats == 1:
                    other.post(f"/runs/{run_id}/approvals/{call}/approve", json={})
            if msg.get("event") == "event":
                kinds.append(json.loads(msg["data"])["kind"])
            if msg.get("event") == "end":
                break
    assert beats >= 1
    assert "approval_decided" in kinds and kinds[-1] == "run_completed"


# -- errors --------------------------------------------------------------------------------


def test_every_error_status_keeps_the_runtime_message(api: httpx.Client) -> None:
    def check(r: httpx.Response, status: int, error: str, words: str = "") -> None:
        assert r.status_code == status, (r.status_code, r.text)
        body = r.json()
        if error:
            assert body["error"] == error, body
            assert words in body["detail"], body

    missing = "run_does_not_exist"
    for method, path in (
        ("GET", f"/runs/{missing}"),
        ("GET", f"/runs/{missing}/events"),
        ("GET", f"/runs/{missing}/messages"),
        ("POST", f"/runs/{missing}/cancel"),
        ("POST", f"/runs/{missing}/resume"),
        ("POST", f"/runs/{missing}/approvals/call_0_0/approve"),
    ):
        check(api.request(method, path, json={}), 404, "RunNotFound", "not found")
    check(
        api.get(f"/runs/{missing}/events", headers={"Accept": "text/event-stream"}),
        404,
        "RunNotFound",
    )
    check(api.post("/runs", json={"agent": "nobody", "input": "x"}), 422, "UnknownAgent", "nobody")
    check(api.post("/runs", json={"agent": "lookup"}), 422, "")
    check(api.post("/runs", json={"agent": "lookup", "input": "x", "by": "mallory"}), 422, "")
    check(api.post("/runs", json={"agent": "lookup", "input": "a\u0000b"}), 422, "")
    check(api.get("/runs", params={"status": "bogus"}), 422, "")
    check(api.get("/runs", params={"cursor": "not-a-cursor"}), 400, "UserError", "cursor")
    run_id = _start(api, "lookup", run_id="run_fixed_id_for_conflict")
    check(
        api.post("/runs", json={"agent": "lookup", "input": "x", "run_id": run_id}),
        409,
        "Conflict",
    )
    wait_for(api, run_id, "completed")
    check(api.post(f"/runs/{run_id}/resume", json={}), 400, "UserError", "completed")
    check(
        api.post(f"/runs/{run_id}/approvals/call_0_0/approve", json={}),
        409,
        "ApprovalError",
        "no pending approval",
    )
    check(
        api.get(f"/runs/{run_id}/events", headers={"Last-Event-ID": "seven"}),
        400,
        "UserError",
        "Last-Event-ID",
    )


def test_request_bodies_are_size_limited(api: httpx.Client) -> None:
    big = json.dumps({"agent": "lookup", "input": "x" * 70_000})
    r = api.post("/runs", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == "PayloadTooLarge"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(80):
            yield b" " * 1024

    r = api.post("/runs", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert api.get("/runs", params={"agent": "lookup"}).status_code == 200


def test_serve_refuses_a_non_loopback_address_without_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'x.db'}"
    assert main(["--store", store, "serve", "--host", "0.0.0.0"]) == 2
    assert "refusing to listen on 0.0.0.0 without a token" in capsys.readouterr().err
    assert main(["--store", store, "serve", "--host", "::", "--token", "a:short"]) == 2
    assert "at least 16 characters" in capsys.readouterr().err
