"""``model_from_string``: a provider from a short string, for the CLI and configuration.

    anthropic:claude-sonnet-4-5                         key from $ANTHROPIC_API_KEY
    openai:gpt-4.1                                      key from $OPENAI_API_KEY
    openai-compatible:http://127.0.0.1:8000/v1:qwen3    vLLM, Ollama, LM Studio...

In the last form the base URL must have a path (``/v1``), and everything after the first
``:`` that follows the path is the model name, so names with colons (``qwen3:8b``) work.
The SDK of a provider is imported only when a string names it; ``LazyModel`` (what an
``Agent`` given a model string holds) imports it only at the first call.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from typing import Any

from stead.errors import ProviderError, UserError
from stead.providers._base import ModelCall, ModelProvider, ModelResponse

_COMPATIBLE = re.compile(r"^(?P<url>https?://[^/\s]+/[^:\s]*):(?P<model>.+)$")

FORMS = (
    "anthropic:MODEL, openai:MODEL, or openai-compatible:BASE_URL:MODEL "
    "(e.g. openai-compatible:http://127.0.0.1:8000/v1:qwen3)"
)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What a model string names, read without importing an SDK or needing a key."""

    kind: str
    """``anthropic``, ``openai`` or ``openai-compatible``."""
    model: str
    """The model name (known before any call: prices and budgets need it)."""
    base_url: str | None = None
    """An OpenAI-compatible server's base URL."""

    @property
    def sdk(self) -> str:
        """The SDK the provider needs: the ``stead[...]`` extra and the module alike."""
        return "anthropic" if self.kind == "anthropic" else "openai"

    @property
    def key_env(self) -> str | None:
        """The environment variable the key comes from (None: a compatible server needs none)."""
        return {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}.get(self.kind)


def parse_model_string(spec: str) -> ModelSpec:
    """Read a model string; a ``UserError`` saying what to write if it is not one."""
    if not isinstance(spec, str):
        raise UserError(f"a model string is a str, not {type(spec).__name__}; use {FORMS}")
    kind, sep, rest = spec.partition(":")
    if not sep or not rest.strip():
        raise UserError(f"model string {spec!r} names no provider; use {FORMS}")
    if any(c < " " or c == "\x7f" or "\ud800" <= c <= "\udfff" for c in spec):
        raise UserError(
            f"model string {spec!r} holds a control character or a lone surrogate; a model "
            "name is plain text (it is sent to the provider and recorded with every reply)"
        )
    if kind in ("anthropic", "openai"):
        return ModelSpec(kind, rest)
    if kind == "openai-compatible":
        match = _COMPATIBLE.match(rest)
        if match is None:
            raise UserError(
                f"model string {spec!r}: expected openai-compatible:BASE_URL:MODEL with a "
                "base URL that has a path, e.g. openai-compatible:http://127.0.0.1:8000/v1:qwen3"
            )
        return ModelSpec(kind, match["model"], match["url"])
    raise UserError(f"unknown model provider {kind!r} in {spec!r}; use {FORMS}")


def model_from_string(spec: str, **options: Any) -> ModelProvider:
    """The provider a model string names; ``options`` go to its constructor."""
    parsed = parse_model_string(spec)
    if parsed.kind == "anthropic":
        try:
            from stead.providers.anthropic import AnthropicModel
        except ImportError as exc:
            raise _missing("anthropic", exc) from exc
        return AnthropicModel(parsed.model, **options)
    try:
        from stead.providers.openai import OpenAIModel
    except ImportError as exc:
        raise _missing("openai", exc) from exc
    if parsed.kind == "openai":
        return OpenAIModel(parsed.model, **options)
    assert parsed.base_url is not None
    return OpenAIModel.compatible_server(parsed.model, parsed.base_url, **options)


class LazyModel:
    """The provider a model string names, made at its first call.

    What ``Agent("name", "anthropic:claude-sonnet-4-6")`` holds: the string is read at once
    (a bad one is a ``UserError`` where the Agent is built, and a missing SDK too, found
    without importing it), but the SDK is imported and the key read only when the first
    model call is made, so building an Agent needs neither (a CLI that only lists runs, a
    test, a process that only approves). Without a key that call fails the run with
    ``authentication_failed`` and says which variable to set; ``stead resume`` continues it.
    """

    def __init__(self, spec: str, **options: Any) -> None:
        self.spec = spec
        self.parsed = parse_model_string(spec)
        if importlib.util.find_spec(self.parsed.sdk) is None:
            raise UserError(
                f"model {spec!r} needs the {self.parsed.sdk} SDK, which is not installed; "
                f"pip install 'stead[{self.parsed.sdk}]'"
            )
        self._options = options
        self._provider: ModelProvider | None = None

    @property
    def model_name(self) -> str:
        """The model the string names (for prices and budgets, before any call)."""
        return self.parsed.model

    def __repr__(self) -> str:
        return f"LazyModel({self.spec!r})"

    def resolve(self) -> ModelProvider:
        """The provider itself, made once (a ``UserError`` if it cannot be, e.g. no key)."""
        if self._provider is None:
            self._provider = model_from_string(self.spec, **self._options)
        return self._provider

    async def complete(self, call: ModelCall) -> ModelResponse:
        """Make the provider if need be, then the call; a provider that cannot be made is a
        ``ProviderError`` (not retried), so the run fails with the reason instead of raising
        into whoever drives it."""
        try:
            provider = self.resolve()
        except UserError as exc:
            env = self.parsed.key_env
            given = self._options.get("api_key") or self._options.get("client")
            missing_key = env is not None and not given and not os.environ.get(env)
            code = "authentication_failed" if missing_key else "bad_request"
            raise ProviderError(f"{exc}; then `stead resume` the run", code=code) from exc
        return await provider.complete(call)


def _missing(extra: str, exc: ImportError) -> UserError:
    return UserError(f"the {extra} SDK is not installed ({exc}); pip install 'stead[{extra}]'")
