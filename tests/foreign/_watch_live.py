"""A framework agent's streamed run watched live from another process, as every integration
shows it: a ``stead serve --worker`` child drives the run; this process reads the text
deltas from the run's SSE stream while the provider's stream is stalled halfway, then lets
it finish; the run's log keeps only the finished reply."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from wire_server import Reply, WireServer
from wire_shapes import openai_stream

sys.path.insert(0, str(Path(__file__).parent.parent / "server"))
from _stack import Stack, sse_messages, wait_for

PROMPT = "The refund policy?"
PARTS = ("The refund ", "policy allows ", "returns.")
"""The streamed reply; the test's wire server stalls it after the first two parts."""


@contextlib.contextmanager
def served(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    wire: WireServer,
    *,
    home: Path,
    url_env: str,
    agents: str,
) -> Iterator[Stack]:
    """A ``stead serve --worker`` child run from ``home`` with ``--agents agents`` on a
    SQLite store in ``tmp_path``, its models on ``wire`` (whose URL it reads from
    ``url_env``); stopped when the block ends."""
    # The child inherits these: the wire server, and where its agents' module is.
    monkeypatch.setenv(url_env, wire.url)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(home), os.environ.get("PYTHONPATH", "")]))
    stack = Stack(f"sqlite:///{tmp_path / 'runs.db'}", tmp_path)
    try:
        stack.serve("--worker", "--agents", agents)
        yield stack
    finally:
        stack.close()


def served_and_watched(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    home: Path,
    url_env: str,
    agents: str,
    agent: str,
) -> None:
    """A streamed run of ``agent`` (``served``'s other arguments) watched live from here;
    the agent speaks OpenAI's Chat Completions."""
    with WireServer() as wire:
        stalled = openai_stream(*PARTS, stall_after=3)  # its role chunk and two parts
        wire.push(stalled)
        with served(
            tmp_path, monkeypatch, wire, home=home, url_env=url_env, agents=agents
        ) as stack:
            watched_live(stack, agent, stalled)


def watched_live(stack: Stack, agent: str, stalled: Reply) -> None:
    """Start a run of ``agent`` on ``stack``'s server and watch it (see the module)."""
    api = stack.client
    assert api is not None
    r = api.post("/runs", json={"agent": agent, "input": PROMPT})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    seen = ""
    with api.stream(
        "GET", f"/runs/{run_id}/events", headers={"Accept": "text/event-stream"}
    ) as stream:
        for msg in sse_messages(stream.iter_lines()):
            if msg.get("event") == "progress":
                seen += str(json.loads(msg["data"])["text"])
            if seen == "".join(PARTS[:2]):
                break  # the provider has not sent the rest yet: the run is running
    assert stalled.stalled.is_set() and not stalled.release.is_set()
    assert api.get(f"/runs/{run_id}").json()["status"] == "running"
    kinds = [e["kind"] for e in api.get(f"/runs/{run_id}/events").json()]
    assert "assistant_message" not in kinds  # what was streamed so far is provisional
    stalled.release.set()
    finished = wait_for(api, run_id, "completed")
    assert finished["output"] == "".join(PARTS)
    replies = api.get(f"/runs/{run_id}/events").json()
    said = [e["data"] for e in replies if e["kind"] == "assistant_message"]
    assert len(said) == 1 and "".join(PARTS) in json.dumps(said[0])  # the finished reply
    assert "progress" not in {e["kind"] for e in replies}  # no delta is durable
