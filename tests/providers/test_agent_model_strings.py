"""An Agent takes a model string, as the README invites: read at once, made at the first call.

Before, ``Agent("x", "anthropic:claude-...")`` was accepted, and the run then raised
``AttributeError`` (a str has no ``model_name``) and was left ``running``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from wire_server import WireServer
from wire_shapes import anthropic_stream, openai_stream

import stead
from stead.core.pricing import Price, PriceTable


async def test_an_anthropic_model_string_runs_with_the_key_from_the_environment(
    server: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's form: the key and (here) the base URL come from the environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    agent = stead.Agent("claude", "anthropic:claude-sonnet-4-6")
    assert agent.model.model_name == "claude-sonnet-4-6"
    server.push(anthropic_stream("It shipped.", input_tokens=10, output_tokens=3))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "Where is order 42?"))
    assert view.status == "completed" and view.output == "It shipped."
    assert server.requests[0].body["model"] == "claude-sonnet-4-6"


async def test_an_openai_compatible_model_string_runs(server: WireServer, tmp_path: Path) -> None:
    agent = stead.Agent("local", f"openai-compatible:{server.url}/v1:qwen3:8b")
    assert agent.model.model_name == "qwen3:8b"
    server.push(openai_stream("Hello.", model="qwen3:8b"))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "hi"))
    assert view.status == "completed" and view.output == "Hello."


async def test_without_a_key_the_run_fails_with_authentication_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the Agent needs no key; the first call fails the run with a code and says
    which variable to set (not retried, not left running)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = stead.Agent("gpt", "openai:gpt-4.1")
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "hi"))
    assert view.status == "failed"
    assert view.error is not None and view.error["code"] == "authentication_failed"
    assert "OPENAI_API_KEY" in view.error["message"]


def test_building_an_agent_from_a_string_imports_no_sdk_and_needs_no_key() -> None:
    script = (
        "import os, sys, stead\n"
        "os.environ.pop('ANTHROPIC_API_KEY', None)\n"
        "a = stead.Agent('x', 'anthropic:claude-sonnet-4-6', budget=stead.Budget(max_usd=1))\n"
        "assert a.model.model_name == 'claude-sonnet-4-6'\n"
        "assert 'anthropic' not in sys.modules and 'openai' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("claude-sonnet-4-6", "names no provider"),
        ("gemini:pro", "unknown model provider 'gemini'"),
        ("openai-compatible:qwen3", "base URL"),
        ("anthropic:", "names no provider"),
        ("openai:gpt-4.1\n", "control character"),
        ("openai-compatible:http://127.0.0.1:8000/v1:\ud800", "lone surrogate"),
        (42, "model takes a model string"),
        (None, "model takes a model string"),
        (object(), "ModelProvider"),
    ],
)
def test_a_bad_model_is_refused_where_the_agent_is_built(model: object, words: str) -> None:
    with pytest.raises(stead.UserError, match=words):
        stead.Agent("x", model)  # type: ignore[arg-type]


def test_a_dollar_budget_prices_the_string_s_model() -> None:
    """The model name is known without a key, so a price is found (or its absence said)."""
    stead.Agent("ok", "openai:gpt-4.1", budget=stead.Budget(max_usd=5))
    with pytest.raises(stead.UserError, match="needs a price for model 'my-model'"):
        stead.Agent(
            "unpriced",
            "openai:my-model",
            budget=stead.Budget(max_usd=5),
            prices=PriceTable({}, defaults=False),
        )
    stead.Agent(
        "priced",
        "openai:my-model",
        budget=stead.Budget(max_usd=5),
        prices=PriceTable(
            {"my-model": Price(input=1.0, output=2.0, cache_write=1.0, cache_read=0.1)}
        ),
    )
