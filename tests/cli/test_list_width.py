"""``stead runs list`` at 80 columns: compact numbers, whole; the least useful columns go
first when a row does not fit, and the agent is cut only after them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import stead
from stead.cli import main
from stead.core.messages import Usage
from stead.testing import Reply, ScriptedModel


def _list(capsys: pytest.CaptureFixture[str], store: str, columns: int) -> list[str]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", str(columns))
        assert main(["--store", store, "runs", "list"]) == 0
    return capsys.readouterr().out.splitlines()


def test_runs_list_fits_80_columns_and_never_cuts_a_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    big = Usage(input_tokens=1_234_567, output_tokens=89_000)

    @stead.tool(effect="non_idempotent", requires_approval=True)
    def refund(order_id: int) -> str:
        """Refund an order."""
        return "refunded"

    async def go() -> None:
        model = ScriptedModel(
            [Reply(tool_calls=[("refund", {"order_id": 1})], usage=big)], name="claude-sonnet-4-6"
        )
        agent = stead.Agent("customer-support-refunds-eu-west", model, [refund])
        async with stead.Runtime(store, agents=[agent]) as rt:
            for _ in range(3):
                await rt.run(await rt.start(agent, "refund order 1"))

    asyncio.run(go())
    lines = _list(capsys, store, 80)
    assert max(len(line) for line in lines) <= 80, lines
    header, row = lines[0].split(), lines[2]
    # The run's duration is the first to go, before the agent is cut below 8 characters.
    assert header == ["run", "agent", "status", "age", "turns", "tokens", "cost"]
    assert "awaiting_approval" in row and " 1.3M " in row and row.endswith(" $5.04")
    assert row.count("…") == 1 and "customer-sup…" in row  # only the agent is cut

    narrow = _list(capsys, store, 60)
    assert max(len(line) for line in narrow) <= 60, narrow
    assert narrow[0].split() == ["run", "agent", "status", "age", "cost"]
    assert narrow[2].endswith(" $5.04")
