"""Pydantic AI agents on Pydantic AI's own models, pointed at a wire server in this process."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models import Model

from stead.pydantic_ai import SteadDurability


def claude(url: str) -> Model:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    return AnthropicModel(
        "claude-sonnet-4-6", provider=AnthropicProvider(api_key="sk-ant-test", base_url=url)
    )


def gpt(url: str) -> Model:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(
        "gpt-4.1", provider=OpenAIProvider(api_key="sk-test", base_url=url + "/v1")
    )


def agent(url: str, name: str = "helper", **kw: Any) -> Agent[Any, Any]:
    durability = SteadDurability(
        **{k: kw.pop(k) for k in ("limits", "budget", "durability") if k in kw}
    )
    more = kw.pop("capabilities", [])
    return Agent(claude(url), name=name, capabilities=[durability, *more], **kw)
