"""The seed scenario's model replies, in each provider's wire format, what the model was
sent back (the tool results under their call ids), and the CLI in a child process run from
this directory: the crash harness's (``_agent_crashes``), for the agent of this directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

from _agent_crashes import (
    CUSTOMER,
    MESSAGE,
    Framework,
    base_env,
    call_ids,
    calls_reply,
    deliveries,
    seed_replies,
    text_reply,
    tool_results,
)
from _agent_crashes import stead_cli as _stead_cli

from _spawn import STEAD

HERE = Path(__file__).parent
WARM = (
    "stead.pydantic_ai",
    "pydantic_ai.models.anthropic",
    "pydantic_ai.providers.anthropic",
    "pydantic_ai.models.openai",
    "pydantic_ai.providers.openai",
)
"""What this directory's children import: Pydantic AI and its model classes."""
__all__ = [
    "CUSTOMER",
    "MESSAGE",
    "PAI",
    "STEAD",
    "WARM",
    "call_ids",
    "calls_reply",
    "deliveries",
    "env",
    "seed_replies",
    "stead_cli",
    "text_reply",
    "tool_results",
]


def env(provider: str, url: str, ledger: Path, **extra: str) -> dict[str, str]:
    return base_env(ledger, PAI_PROVIDER=provider, PAI_BASE_URL=url, **extra)


def stead_cli(
    *args: str, env: dict[str, str], timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return _stead_cli(*args, env=env, cwd=HERE, timeout=timeout, warm=WARM)


PAI = Framework(
    agent="support_agent:agent",
    home=HERE,
    provider="anthropic",
    ids=("toolu_1", "toolu_2"),
    env=lambda url, ledger, **extra: env("anthropic", url, ledger, **extra),
    warm=WARM,
)
"""The agent of this directory as the crash harness drives it."""
