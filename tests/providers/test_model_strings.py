"""Model strings name a provider, a model and (for compatible servers) a base URL."""

from __future__ import annotations

import pytest

from stead import UserError
from stead.providers import ModelProvider, model_from_string
from stead.providers.anthropic import AnthropicModel
from stead.providers.openai import OpenAIModel


def test_anthropic_and_openai_take_keys_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    claude = model_from_string("anthropic:claude-sonnet-4-6")
    gpt = model_from_string("openai:gpt-4.1")
    assert isinstance(claude, AnthropicModel) and claude.model_name == "claude-sonnet-4-6"
    assert isinstance(gpt, OpenAIModel) and gpt.model_name == "gpt-4.1" and not gpt.compatible
    assert isinstance(claude, ModelProvider) and isinstance(gpt, ModelProvider)


@pytest.mark.parametrize(
    ("spec", "url", "model"),
    [
        ("openai-compatible:http://127.0.0.1:8000/v1:qwen3", "http://127.0.0.1:8000/v1", "qwen3"),
        ("openai-compatible:http://localhost:11434/v1:qwen3:8b", "http://localhost:11434/v1",
         "qwen3:8b"),
        ("openai-compatible:https://llm.internal/api/v1:org/model-7b", "https://llm.internal/api/v1",
         "org/model-7b"),
    ],
)  # fmt: skip
def test_compatible_servers(spec: str, url: str, model: str) -> None:
    provider = model_from_string(spec)
    assert isinstance(provider, OpenAIModel) and provider.compatible
    assert provider.model_name == model
    assert repr(provider) == f"OpenAIModel({model!r}, base_url={url!r})"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("claude-sonnet-4-6", "names no provider"),
        ("gemini:pro", "unknown model provider"),
        ("openai-compatible:qwen3", "base URL"),
        ("openai-compatible:http://127.0.0.1:8000:qwen3", "base URL that has a path"),
    ],
)
def test_bad_strings_say_what_to_write(spec: str, words: str) -> None:
    with pytest.raises(UserError, match=words):
        model_from_string(spec)


def test_missing_keys_are_a_clear_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="set ANTHROPIC_API_KEY"):
        model_from_string("anthropic:claude-sonnet-4-6")
    with pytest.raises(UserError, match="set OPENAI_API_KEY"):
        model_from_string("openai:gpt-4.1")
    model_from_string("openai-compatible:http://127.0.0.1:8000/v1:qwen3")  # needs none
