"""Moving runs between stores with real runs: a SQLite store copied to PostgreSQL (the
command line's ``stead store copy``) is driven on there (a decision taken, a queued run
driven, a conversation continued) without running anything it had recorded again, and the
two stores export the same bytes; an export imported into another store reads the same."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

import stead
from stead.cli import main
from stead.core.messages import ToolResultMessage
from stead.testing import Reply, ScriptedModel, assert_valid_history

RAN: list[str] = []

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00"
    b"\x00\x00\x00IEND\xaeB`\x82"
)


@stead.tool(effect="read_only")
def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up."""
    RAN.append(f"lookup {order_id}")
    return {"order_id": order_id, "status": "shipped"}


@stead.tool(effect="non_idempotent", requires_approval=lambda a: True)
def refund(order_id: int) -> str:
    """Refund an order."""
    RAN.append(f"refund {order_id}")
    return "refunded"


def agents() -> list[stead.Agent]:
    script = [
        Reply(tool_calls=[("lookup", {"order_id": 1})]),
        Reply(tool_calls=[("refund", {"order_id": 1})]),
        Reply(text="refunded it"),
    ]
    chat = stead.Agent("chat", ScriptedModel([Reply(text="hi")] * 6), [])
    return [stead.Agent("support", ScriptedModel(script), [lookup, refund]), chat]


async def export_all(url: str) -> str:
    async with stead.Runtime(url) as rt:
        out = io.StringIO()
        await rt.export(out)
        return out.getvalue()


def test_a_sqlite_store_copied_to_postgres_is_driven_on_there(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    RAN.clear()
    sqlite = f"sqlite:///{tmp_path / 'from.db'}"

    async def before() -> tuple[str, str, str]:
        support, chat = agents()
        async with stead.Runtime(sqlite, agents=[support, chat]) as rt:
            waiting = await rt.run(await rt.start(support, "refund order 1"))
            assert waiting.status.value == "awaiting_approval"
            queued = await rt.start(support, "refund order 1, later")
            await rt.send("c-1", "look", agent=chat, attachments=[stead.Image(PNG)])
            return waiting.run_id, queued, waiting.approvals[0].tool_call_id

    waiting, queued, call = asyncio.run(before())
    assert RAN == ["lookup 1"]

    assert main(["store", "copy", sqlite, pg_url]) == 0
    assert "copied 3 runs" in capsys.readouterr().out
    assert asyncio.run(export_all(sqlite)) == asyncio.run(export_all(pg_url))

    async def on_postgres() -> None:
        support, chat = agents()
        async with stead.Runtime(pg_url, agents=[support, chat]) as rt:
            done = await rt.approve(waiting, call)
            done = await rt.run(waiting) if done.status.value != "completed" else done
            assert done.status.value == "completed" and done.output == "refunded it"
            later = await rt.run(queued)  # driven from its start on PostgreSQL
            assert later.status.value == "awaiting_approval"
            reply = await rt.send("c-1", "and again")
            assert [m.content for m in reply.messages if m.role == "user"] == ["look", "and again"]
            for rid in (waiting, queued, reply.run_id):
                assert_valid_history(await rt.state(rid))
            results = [m for m in done.messages if isinstance(m, ToolResultMessage)]
            assert [m.name for m in results] == ["lookup", "refund"]

    asyncio.run(on_postgres())
    # The lookup recorded on SQLite did not run again; the approved refund ran once; the
    # queued run made its own lookup.
    assert RAN == ["lookup 1", "refund 1", "lookup 1"]


def test_an_export_file_imports_into_another_store_and_reads_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = f"sqlite:///{tmp_path / 'a.db'}"
    b = f"sqlite:///{tmp_path / 'b.db'}"

    async def make() -> str:
        support, _ = agents()
        async with stead.Runtime(a, agents=[support]) as rt:
            return (await rt.run(await rt.start(support, "refund order 2"))).run_id

    rid = asyncio.run(make())
    file = tmp_path / "run.jsonl"
    assert main(["--store", a, "runs", "export", rid, "-o", str(file)]) == 0
    assert main(["--store", b, "runs", "import", str(file)]) == 0
    assert "imported 1 runs" in capsys.readouterr().out
    assert asyncio.run(export_all(a)) == asyncio.run(export_all(b))
    # a second import of the same file is refused, one line, exit 2; under new ids it goes in
    assert main(["--store", b, "runs", "import", str(file)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["--store", b, "runs", "import", str(file), "--new-ids"]) == 0
    assert f"{rid} -> run_" in capsys.readouterr().out
    file.write_text(file.read_text().replace('"stead_export":1', '"stead_export":9'))
    assert main(["--store", b, "runs", "import", str(file)]) == 2
    flat = " ".join(capsys.readouterr().err.split())
    assert "line 1: written in export format 9, newer than this stead reads" in flat


def test_a_crash_during_an_import_leaves_whole_runs(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from _crash_harness import KILLED, finish

    a = f"sqlite:///{tmp_path / 'a.db'}"
    b = f"sqlite:///{tmp_path / 'b.db'}"

    async def make() -> list[str]:
        support, _ = agents()
        async with stead.Runtime(a, agents=[support]) as rt:
            return [(await rt.run(await rt.start(support, f"refund {i}"))).run_id for i in range(3)]

    runs = asyncio.run(make())
    file = tmp_path / "runs.jsonl"
    assert main(["--store", a, "runs", "export", "-o", str(file)]) == 0

    def child(crash: str | None, *extra: str) -> Any:
        env = {k: v for k, v in os.environ.items() if k != "STEAD_CRASH_AT"}
        if crash:
            env["STEAD_CRASH_AT"] = crash
        script = Path(__file__).parent / "lifecycle_child.py"
        p = subprocess.Popen(
            [sys.executable, str(script), b, "import", str(file), *extra],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = p.communicate(timeout=60)
        return finish(p, out, err)

    killed = child("before_import_commit#2")  # inside the second run's transaction
    assert killed.returncode == KILLED, killed.stderr

    async def present() -> list[str]:
        async with stead.Runtime(b) as rt:
            return [r.run_id for r in await rt.list_runs()]

    (first,) = asyncio.run(present())  # the first run whole, nothing of the second
    assert first in runs
    whole = [line for line in file.read_text().splitlines() if f'"run_id":"{first}"' in line]
    assert all(line in asyncio.run(export_all(b)) for line in whole)

    again = child(None)  # the runs that are there are refused, and nothing is written
    assert again.returncode != 0 and "already exists" in again.stderr
    assert asyncio.run(present()) == [first]
    done = child(None, "skip")  # finishing it: the run that is there is left as it was
    assert done.returncode == 0, done.stderr
    assert sorted(done.out["runs"]) == sorted(set(runs) - {first})
    assert asyncio.run(export_all(b)) == asyncio.run(export_all(a))
