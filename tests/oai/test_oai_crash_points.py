"""Every named crash point of a turn, with an Agents SDK agent: a process driving its run is
SIGKILLed there, another resumes the run; the message is delivered exactly once, every call
has exactly one result, and the run completes.

The agent (``oai_support``) is a plain ``agents.Agent`` with ``@function_tool``s on the
SDK's own ``OpenAIChatCompletionsModel``, handed to stead with ``stead.openai_agents.durable``.
The harness is the integrations'
shared one (``_agent_crashes``): every point on SQLite driven by ``stead run`` / ``stead
resume``; a spread of them on PostgreSQL, in the ``effects`` durability mode and driven by
``stead worker`` processes (``STEAD_TEST_ALL_MODES=1``: every point everywhere).
"""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from pathlib import Path

from _agent_crashes import (
    killed_then_resumed,
    resume_cases,
    worker_cases,
    worker_killed_another_finishes,
)
from _oai_scripts import OAI

SPREAD = ["after_intent#2", "after_tool_effect:send_message", "after_result_commit:send_message"]


@pytest.mark.parametrize(
    ("kind", "mode", "crash"),
    resume_cases(spread=SPREAD, effects=["after_tool_effect:send_message"]),
)
def test_killed_at_each_point_then_resumed(
    kind: str, mode: str, crash: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    killed_then_resumed(OAI, kind, mode, crash, tmp_path, request)


@pytest.mark.parametrize(
    ("kind", "crash"),
    worker_cases(
        sqlite=["after_intent#2", "after_tool_effect:send_message"],
        postgres=["after_tool_effect:send_message"],
    ),
)
def test_a_worker_killed_at_a_point_another_worker_finishes(
    kind: str, crash: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    worker_killed_another_finishes(OAI, kind, crash, tmp_path, request)
