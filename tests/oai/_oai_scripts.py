"""The seed scenario's model replies in OpenAI's Chat Completions wire format, what the model
was sent back, and the CLI in a child process run from this directory: the crash harness's
(``_agent_crashes``), for the agent of this directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import _agent_crashes as harness
from _agent_crashes import CUSTOMER, MESSAGE, base_env, deliveries
from wire_server import Reply, Seen

from _spawn import STEAD

HERE = Path(__file__).parent
WARM = ("stead.openai_agents", "agents", "openai")
"""What this directory's children import: the framework and its model classes."""
FOUND, SENT = harness.call_ids("openai")
__all__ = [
    "CUSTOMER",
    "FOUND",
    "MESSAGE",
    "OAI",
    "SENT",
    "STEAD",
    "deliveries",
    "env",
    "seed_replies",
    "stead_cli",
    "tool_results",
]


def seed_replies() -> list[Reply]:
    return harness.seed_replies("openai")


def tool_results(seen: Seen) -> dict[str, str]:
    """The tool results a request sent the model, by call id."""
    return harness.tool_results("openai", seen)


def env(url: str, ledger: Path, **extra: str) -> dict[str, str]:
    return base_env(ledger, OAI_BASE_URL=url, **extra)


def stead_cli(
    *args: str, env: dict[str, str], timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return harness.stead_cli(*args, env=env, cwd=HERE, timeout=timeout, warm=WARM)


OAI = harness.Framework(
    agent="oai_support:agent", home=HERE, provider="openai", ids=(FOUND, SENT), env=env, warm=WARM
)
"""The agent of this directory as the crash harness drives it."""
