"""``model_from_string``: a provider from a short string, for the CLI and configuration.

    anthropic:claude-sonnet-4-5                         key from $ANTHROPIC_API_KEY
    openai:gpt-4.1                                      key from $OPENAI_API_KEY
    openai-compatible:http://127.0.0.1:8000/v1:qwen3    vLLM, Ollama, LM Studio...

In the last form the base URL must have a path (``/v1``), and everything after the first
``:`` that follows the path is the model name, so names with colons (``qwen3:8b``) work.
The SDK of a provider is imported only when a string names it.
"""

from __future__ import annotations

import re
from typing import Any

from stead.errors import UserError
from stead.providers._base import ModelProvider

_COMPATIBLE = re.compile(r"^(?P<url>https?://[^/\s]+/[^:\s]*):(?P<model>.+)$")

FORMS = (
    "anthropic:MODEL, openai:MODEL, or openai-compatible:BASE_URL:MODEL "
    "(e.g. openai-compatible:http://127.0.0.1:8000/v1:qwen3)"
)


def model_from_string(spec: str, **options: Any) -> ModelProvider:
    """The provider a model string names; ``options`` go to its constructor."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise UserError(f"model string {spec!r} names no provider; use {FORMS}")
    if kind == "anthropic":
        try:
            from stead.providers.anthropic import AnthropicModel
        except ImportError as exc:
            raise _missing("anthropic", exc) from exc
        return AnthropicModel(rest, **options)
    if kind in ("openai", "openai-compatible"):
        try:
            from stead.providers.openai import OpenAIModel
        except ImportError as exc:
            raise _missing("openai", exc) from exc
        if kind == "openai":
            return OpenAIModel(rest, **options)
        match = _COMPATIBLE.match(rest)
        if match is None:
            raise UserError(
                f"model string {spec!r}: expected openai-compatible:BASE_URL:MODEL with a "
                "base URL that has a path, e.g. openai-compatible:http://127.0.0.1:8000/v1:qwen3"
            )
        return OpenAIModel.compatible_server(match["model"], match["url"], **options)
    raise UserError(f"unknown model provider {kind!r} in {spec!r}; use {FORMS}")


def _missing(extra: str, exc: ImportError) -> UserError:
    return UserError(f"the {extra} SDK is not installed ({exc}); pip install 'stead[{extra}]'")
