"""A tool's result has a bound: past it the result is cut, with a note the model reads,
before it is recorded. Local tools, on a real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import stead
from stead.core.effects import ToolFailed, ToolSucceeded, ToolUnknown
from stead.core.events import ToolResultRecorded
from stead.testing import Reply, ScriptedModel


@stead.tool(effect="read_only")
def dump(n: int) -> str:
    """n characters."""
    return "y" * n


@stead.tool(effect="read_only", max_result=50)
def small(n: int) -> str:
    """n characters, of which 50 are kept."""
    return "z" * n


@stead.tool(effect="read_only")
def fail(n: int) -> str:
    """Raises with a long message."""
    raise RuntimeError("e" * n)


async def _results(tmp_path: Path, calls: list[Any], **limits: Any) -> list[ToolResultRecorded]:
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    agent = stead.Agent("a", model, [dump, small, fail], limits=stead.Limits(**limits))
    async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "go"))
        assert view.status == stead.RunStatus.COMPLETED
        events = [s.event for s in await rt.events(view.run_id)]
    return [e for e in events if isinstance(e, ToolResultRecorded)]


async def test_a_result_past_the_default_is_cut_with_a_note(tmp_path: Path) -> None:
    [result] = await _results(tmp_path, [("dump", {"n": 3_000_000})])
    assert result.content.startswith("y" * 1_000_000)
    assert "this result was 3,000,000 characters; only the first 1,000,000" in result.content
    assert len(result.content) < 1_000_300


async def test_the_agents_bound_and_the_tools_own(tmp_path: Path) -> None:
    fits, cut_agent, cut_tool, failed = await _results(
        tmp_path,
        [("dump", {"n": 100}), ("dump", {"n": 5000}), ("small", {"n": 100}), ("fail", {"n": 9000})],
        max_tool_result=1000,
    )
    assert fits.content == "y" * 100  # what fits is untouched
    assert cut_agent.content.startswith("y" * 1000) and "5,000 characters" in cut_agent.content
    assert cut_tool.content.startswith("z" * 50) and "100 characters" in cut_tool.content
    assert failed.is_error and "9,0" in failed.content and len(failed.content) < 1300


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", 2**40])
def test_a_bound_that_is_no_bound_is_refused_where_it_is_given(bad: Any) -> None:
    with pytest.raises(stead.UserError, match="max_result"):
        stead.tool(max_result=bad)
    with pytest.raises(stead.UserError, match="max_tool_result"):
        stead.Limits(max_tool_result=bad)


@given(text=st.text(max_size=300), limit=st.integers(1, 400))
def test_a_cut_keeps_the_start_and_says_how_long_the_whole_was(text: str, limit: int) -> None:
    from stead.core.result_bound import bound_outcome, cut

    out = cut(text, limit)
    if len(text) <= limit:
        assert out == text
    else:
        assert out.startswith(text[:limit]) and f"was {len(text):,} characters" in out
    for outcome in (
        ToolSucceeded(content=text),
        ToolFailed(failure=text),
        ToolUnknown(reason=text),
    ):
        bounded = bound_outcome(outcome, limit)
        assert type(bounded) is type(outcome)
        assert (bounded is outcome) == (len(text) <= limit)
