"""A Pydantic AI agent under ``stead serve --worker`` (a child process driving its runs):
the HTTP API lists and shows its run, a person approves its call over HTTP and the same run
goes on; a streamed reply's text reaches a reader of the SSE stream in this process while
the model's stream is still open, and the finished reply is what the run keeps."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

import json
import os
import sys
from pathlib import Path

from wire_server import WireServer
from wire_shapes import anthropic_stream

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "server"))
from _stack import Stack, sse_messages, wait_for


def test_served_runs_are_listed_approved_and_streamed_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WireServer() as wire:
        stalled = anthropic_stream("The refund ", "policy allows ", "returns.", stall_after=5)
        wire.push(
            anthropic_stream(tools=[("toolu_1", "refund", ['{"order_id": 42, "cents": 5000}'])]),
            anthropic_stream("Refunded."),
            stalled,
        )
        # The children inherit these: the wire server, and where pai_served is.
        monkeypatch.setenv("PAI_BASE_URL", wire.url)
        monkeypatch.setenv(
            "PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
        )
        stack = Stack(f"sqlite:///{tmp_path / 'runs.db'}", tmp_path)
        try:
            stack.serve("--worker", "--agents", "pai_served:agents")
            api = stack.client
            assert api is not None

            # An approval, shown and answered over HTTP; the same run goes on.
            r = api.post("/runs", json={"agent": "pai_refunds", "input": "Refund order 42"})
            assert r.status_code == 201, r.text
            run_id = r.json()["run_id"]
            waiting = wait_for(api, run_id, "awaiting_approval")
            (pending,) = waiting["approvals"]
            assert pending["tool"] == "refund"
            listed = api.get("/runs").json()
            assert run_id in [run["run_id"] for run in listed["runs"]]
            r = api.post(f"/runs/{run_id}/approvals/{pending['tool_call_id']}/approve", json={})
            assert r.status_code == 200, r.text
            done = wait_for(api, run_id, "completed")
            assert done["output"] == "Refunded." and done["agent"] == "pai_refunds"

            # A streamed reply, read from here while the model's stream is stalled.
            r = api.post("/runs", json={"agent": "pai_streamer", "input": "The refund policy?"})
            run_id = r.json()["run_id"]
            seen = ""
            with api.stream(
                "GET", f"/runs/{run_id}/events", headers={"Accept": "text/event-stream"}
            ) as stream:
                for msg in sse_messages(stream.iter_lines()):
                    if msg.get("event") == "progress":
                        seen += str(json.loads(msg["data"])["text"])
                    if seen == "The refund policy allows ":
                        break  # the provider has not sent the rest yet: the run is running
            assert stalled.stalled.is_set() and not stalled.release.is_set()
            assert api.get(f"/runs/{run_id}").json()["status"] == "running"
            stalled.release.set()
            finished = wait_for(api, run_id, "completed")
            assert finished["output"] == "The refund policy allows returns."
        finally:
            stack.close()
