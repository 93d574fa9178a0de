"""Every named crash point of a turn, with a LangChain agent: a process driving its run is
SIGKILLed there, another resumes the run; the message is delivered exactly once, every call
has exactly one result, and the run completes.

The agent (``lc_support``) is ``create_agent`` with ``@tool``s and
``stead.langchain.SteadMiddleware`` on LangChain's own ``ChatOpenAI``, handed to stead with
``stead.langchain.durable``. The harness is the integrations'
shared one (``_agent_crashes``): every point on SQLite driven by ``stead run`` / ``stead
resume``; a spread of them on PostgreSQL, in the ``effects`` durability mode and driven by
``stead worker`` processes (``STEAD_TEST_ALL_MODES=1``: every point everywhere).
"""

from __future__ import annotations

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

from _agent_crashes import crash_point_tests
from _lc_scripts import LC

test_killed_at_each_point_then_resumed, test_a_worker_killed_at_a_point_another_worker_finishes = (
    crash_point_tests(LC)
)
