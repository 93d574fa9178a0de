"""Shared helpers for the tools tests: a real ToolContext, no fakes of our own code."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stead._signal import AbortSignal
from stead.core.canonical import idempotency_key
from stead.tools import ToolContext


def make_ctx(tool_name: str = "t", *, signal: AbortSignal | None = None) -> ToolContext:
    """A context like the runtime builds for attempt 1 of call ``call-1`` in run ``run-1``."""
    return ToolContext(
        run_id="run-1",
        tool_call_id="call-1",
        turn_index=0,
        idempotency_key=idempotency_key("run-1", "call-1"),
        attempt=1,
        tool_name=tool_name,
        signal=signal or AbortSignal(),
    )


@pytest.fixture
def ctx() -> ToolContext:
    return make_ctx()


@pytest.fixture
def ctx_with() -> Callable[[AbortSignal], ToolContext]:
    """Build a context around a given signal."""
    return lambda signal: make_ctx(signal=signal)
