"""``stead runs list --conversation`` and the timeline of a conversation's run."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import stead
from _spawn import stead_cli as spawned_cli
from stead.cli._ids import short_id
from stead.testing import ScriptedModel

STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]


def stead_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return spawned_cli(*args, env={**os.environ, "COLUMNS": "160"}, timeout=120)


def test_runs_list_conversation_and_the_timeline(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    agent = stead.Agent("chat", ScriptedModel(["Shipped.", "12345.", "Bye."]))

    async def talk() -> list[str]:
        async with stead.Runtime(store, agents=[agent]) as rt:
            ids = [(await rt.send("support-7", "Where is order 42?", agent=agent)).run_id]
            ids.append((await rt.send("support-7", "and the zip code?")).run_id)
            await rt.send("other", "hello", agent=agent)
            return ids

    ids = asyncio.run(talk())
    listed = stead_cli("--store", store, "runs", "list", "--conversation", "support-7", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["run_id"] for r in rows] == ids  # the conversation's order, only its runs
    assert {r["session_id"] for r in rows} == {"support-7"}
    table = stead_cli("--store", store, "runs", "list", "--conversation", "support-7")
    assert table.returncode == 0 and all(short_id(i) in table.stdout for i in ids)
    shown = stead_cli("--store", store, "runs", "show", ids[1])
    assert shown.returncode == 0, shown.stderr
    assert "[conversation support-7, after 2 messages]" in shown.stdout
    missing = stead_cli("--store", store, "runs", "list", "--conversation", "nope")
    assert missing.returncode == 2 and "no conversation 'nope'" in missing.stderr
