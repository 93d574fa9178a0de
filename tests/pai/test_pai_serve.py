"""A Pydantic AI agent under ``stead serve --worker`` (a child process driving its runs):
the HTTP API lists and shows its run, a person approves its call over HTTP and the same run
goes on; a streamed reply's text reaches a reader of the SSE stream in this process while
the model's stream is still open, and the finished reply is what the run keeps (watched as
every integration's is: ``_watch_live``)."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pathlib import Path

from _watch_live import PARTS, served, wait_for, watched_live
from wire_server import WireServer
from wire_shapes import anthropic_stream

HERE = Path(__file__).parent


def test_served_runs_are_listed_approved_and_streamed_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WireServer() as wire:
        stalled = anthropic_stream(*PARTS, stall_after=5)
        wire.push(
            anthropic_stream(tools=[("toolu_1", "refund", ['{"order_id": 42, "cents": 5000}'])]),
            anthropic_stream("Refunded."),
            stalled,
        )
        with served(
            tmp_path, monkeypatch, wire, home=HERE, url_env="PAI_BASE_URL",
            agents="pai_served:agents",
        ) as stack:  # fmt: skip
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
            watched_live(stack, "pai_streamer", stalled)
