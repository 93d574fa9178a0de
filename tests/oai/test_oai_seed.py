"""The seed scenario under the OpenAI Agents SDK: an agent sends one message; its process is
SIGKILLed after the delivery and before the result is recorded; ``stead resume`` finishes
the run, and the message went out once.

The agent is a plain ``agents.Agent`` with ``@function_tool``s, on the SDK's own
``OpenAIChatCompletionsModel`` (the official ``AsyncOpenAI`` client) against the suite's
wire server, handed to stead with ``stead.openai_agents.durable``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from pathlib import Path

from _agent_crashes import killed_after_delivery
from _oai_scripts import OAI


def test_killed_after_delivery_resumes_and_delivers_once(tmp_path: Path) -> None:
    killed_after_delivery(OAI, tmp_path)
