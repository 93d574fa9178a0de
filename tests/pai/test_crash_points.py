"""Every named crash point of a turn, with a Pydantic AI agent: a process driving its run is
SIGKILLed there, another resumes the run; the message is delivered exactly once, every call
has exactly one result, and the run completes.

The agent (``support_agent``) is a plain Pydantic AI agent with ``SteadDurability`` on
Pydantic AI's own ``AnthropicModel``. The harness is the integrations' shared one
(``_agent_crashes``): every point on SQLite driven by ``stead run`` / ``stead resume``; a
spread of them on PostgreSQL, in the ``effects`` durability mode and driven by ``stead
worker`` processes (``STEAD_TEST_ALL_MODES=1``: every point everywhere).
"""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from _agent_crashes import crash_point_tests
from _scripts import PAI

SPREAD = ["mid_model_call#2", "after_intent#2", "after_tool_effect:send_message"]
"""On PostgreSQL and under ``stead worker``: a model call, an intent and the non_idempotent
call's effect in flight (every point is killed on SQLite under ``stead run``; all of them
everywhere with ``STEAD_TEST_ALL_MODES=1``). Each case starts two children that import
Pydantic AI and the Anthropic SDK, seconds of CPU each: the default suite keeps a spread."""
EFFECTS = [
    "after_intent#1",
    "after_result_commit:find_customer",
    "after_tool_effect:send_message",
    "before_result_commit:send_message",
]
"""In ``effects`` mode: kills while events are held in memory (an intent, a read_only
result) and at the non_idempotent call's boundaries, which that mode keeps durable."""


(
    test_killed_at_each_point_then_resumed,
    test_a_worker_killed_at_each_point_another_worker_finishes,
) = crash_point_tests(
    PAI,
    spread=SPREAD,
    effects=EFFECTS,
    workers=SPREAD,
    pg_workers=["after_intent#2", "after_tool_effect:send_message"],
)
