"""``stead run MOD:AGENT PROMPT --model ...`` streams a real provider's text to the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_runs import stream
from wire_server import WireServer

from stead.cli import main
from stead.core.messages import Usage


def test_stead_run_streams_text_and_prints_usage_and_cost(
    server: WireServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    u = Usage(input_tokens=1000, output_tokens=100)
    lookup = [("call_1", "lookup_order", ['{"order_id": 42}'])]
    server.push(
        stream("openai", "Let me ", "check.", tools=lookup, usage=u),
        stream("openai", "Order 42 ", "has ", "shipped.", usage=u, cut_after=3),  # cut, retried
        stream("openai", "Order 42 ", "has ", "shipped.", usage=u),
    )
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    code = main(
        [
            "--store",
            store,
            "run",
            "stead.demo.assistant:agent",
            "Where is order 42?",
            "--model",
            f"openai-compatible:{server.url}/v1:gpt-4.1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert "Let me check." in lines
    cut = lines.index("Order 42 has ")
    assert lines[cut + 1] == "[the reply above was cut off; retrying]"
    assert lines[cut + 2] == "Order 42 has shipped."
    assert any(line.startswith("completed  Order 42 has shipped.") for line in lines)
    assert "usage: 2000 in, 200 out, 0 cache write, 0 cache read · $0.0056" in out
    assert server.requests[0].body["model"] == "gpt-4.1"


def test_stead_run_without_a_key_says_which_variable_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    code = main(
        ["--store", store, "run", "stead.demo.assistant:agent", "hi", "--model", "anthropic:x"]
    )
    assert code == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
