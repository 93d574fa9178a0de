"""The seed scenario under LangChain agents: an agent sends one message; its process is
SIGKILLed after the delivery and before the result is recorded; ``stead resume`` finishes
the run, and the message went out once.

The agent is ``create_agent`` with ``@tool``s and ``stead.langchain.SteadMiddleware``, on
LangChain's own ``ChatOpenAI`` (the official OpenAI client) against the suite's wire server,
handed to stead with ``stead.langchain.durable``. No checkpointer.
"""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

from pathlib import Path

from _agent_crashes import killed_after_delivery
from _lc_scripts import LC


def test_killed_after_delivery_resumes_and_delivers_once(tmp_path: Path) -> None:
    killed_after_delivery(LC, tmp_path)
