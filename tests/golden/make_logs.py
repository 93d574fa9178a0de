"""Write the golden logs in ``tests/golden/logs/``: real runs recorded by stead's code.

Each file is one run as its store holds it: every event row exactly as written (kind,
version, the data column's text), the snapshot the store kept (if any), and what that log
means, read by the code that wrote it (status, output, usage, the conversation, the calls).
``test_golden_logs.py`` checks that today's code still reads every file to the same meaning,
as Temporal's replayer tests keep old histories.

Run it only to ADD a log (``python tests/golden/make_logs.py NAME-TAG`` writes scenario NAME
to ``NAME-TAG.json``, e.g. ``every_kind-v4`` when an event kind or a snapshot version is
added): rewriting the existing files with new code would defeat their purpose. Each file
names the commit that wrote it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import stead
from stead.core.fold import RunState
from stead.core.messages import message_to_json
from stead.testing import Reply, ScriptedModel

HERE = Path(__file__).parent / "logs"


@stead.tool(effect="read_only")
def lookup(order_id: int) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped", "note": "Ünïcödé 🚀 [bold]x[/]"}


@stead.tool(effect="idempotent_write")
def upsert(ticket: str, body: str) -> str:
    """Create or update a ticket."""
    return f"ticket {ticket} saved"


@stead.tool(effect="non_idempotent", requires_approval=lambda a: a["cents"] > 100)
def refund(order_id: int, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents}"


@stead.tool(effect="read_only")
async def slow(seconds: float, ctx: stead.ToolContext) -> str:
    """Wait."""
    await asyncio.sleep(seconds)
    return "waited"


def meaning(state: RunState) -> dict[str, Any]:
    """What a log means, in plain JSON: the figures a reader of the run relies on."""
    assert state.status is not None
    return {
        "run_id": state.run_id,
        "agent": state.agent,
        "status": state.status.value,
        "seq": state.seq,
        "output": state.output,
        "stop_reason": state.stop_reason,
        "error": state.error,
        "usage": state.usage.to_json(),
        "turn_index": state.turn_index,
        "conversation": [message_to_json(m) for m in state.conversation()],
        "calls": {
            cid: {
                "name": c.name,
                "effect_class": c.effect_class,
                "idempotency_key": c.idempotency_key,
                "attempts": c.attempts,
                "result": None if c.result is None else [c.result.content, c.result.is_error],
            }
            for cid, c in sorted(state.calls.items())
        },
        "approvals": sorted(state.approvals),
    }


async def _basic(rt: stead.Runtime) -> str:
    agent = stead.Agent(
        "basic",
        ScriptedModel(
            [
                Reply(text="Looking.", tool_calls=[("lookup", {"order_id": 42})]),
                Reply(tool_calls=[("upsert", {"ticket": "T-1", "body": "shipped"})]),
                "It shipped; ticket T-1 updated.",
            ]
        ),
        [lookup, upsert],
        system="You help with orders.",
    )
    rt.register(agent)
    rid = await rt.start(agent, "Where is order 42?", session_id="s-1", run_id="run_basic")
    await rt.run(rid)
    return rid


async def _approval(rt: stead.Runtime) -> str:
    agent = stead.Agent(
        "refunds",
        ScriptedModel(
            [
                Reply(
                    tool_calls=[
                        ("refund", {"order_id": 1, "cents": 5000}),
                        ("refund", {"order_id": 2, "cents": 50}),
                        ("lookup", {"order_id": 3}),
                    ]
                ),
                Reply(tool_calls=[("refund", {"order_id": 4, "cents": 900})]),
                "Done.",
            ]
        ),
        [refund, lookup],
        limits=stead.Limits(approval_timeout=3600),
    )
    rt.register(agent)
    rid = await rt.start(agent, "Refund orders 1 and 2", run_id="run_approval")
    view = await rt.run(rid)
    (pending,) = view.approvals
    await rt.approve(
        rid,
        pending.tool_call_id,
        token=pending.token,
        arguments={"order_id": 1, "cents": 4000},
        by="ops",
    )
    view = await rt.run(rid)
    (pending,) = view.approvals
    await rt.deny(rid, pending.tool_call_id, "too much", token=pending.token, by="ops")
    await rt.run(rid)
    return rid


async def _failures(rt: stead.Runtime) -> str:
    agent = stead.Agent(
        "flaky",
        ScriptedModel(
            [
                Reply(error="rate_limited", fail_times=2, text="ok", tool_calls=[("nope", {})]),
                Reply(tool_calls=[("lookup", '{"order_id": "x"')]),
                Reply(tool_calls=[("lookup", {"order_id": 7})] * 4),
                Reply(tool_calls=[("lookup", {"order_id": 7})]),
                Reply(tool_calls=[("lookup", {"order_id": 7})]),
                "final",
            ]
        ),
        [lookup],
        limits=stead.Limits(max_turns=5, max_tool_calls_per_turn=3, repeat_threshold=3),
    )
    rt.register(agent)
    rid = await rt.start(agent, "Try hard", run_id="run_failures")
    await rt.run(rid)
    return rid


async def _budget(rt: stead.Runtime) -> str:
    agent = stead.Agent(
        "budgeted",
        ScriptedModel(
            [
                Reply(
                    tool_calls=[("lookup", {"order_id": 1})],
                    usage=stead.core.messages.Usage(input_tokens=900, output_tokens=50),
                ),
                "never",
            ]
        ),
        [lookup],
        budget=stead.Budget(max_total_tokens=5000),
    )
    rt.register(agent)
    rid = await rt.start(agent, "Spend", run_id="run_budget")
    await rt.run(rid)
    return rid


async def _cancel_resume(rt: stead.Runtime) -> str:
    agent = stead.Agent(
        "cancelled",
        ScriptedModel(
            [
                Reply(tool_calls=[("slow", {"seconds": 30}), ("lookup", {"order_id": 5})]),
                Reply(tool_calls=[("slow", {"seconds": 0})]),
                "after resume",
            ]
        ),
        [slow, lookup],
        limits=stead.Limits(cancel_grace=0.2),
    )
    rt.register(agent)
    rid = await rt.start(agent, "Wait a while", run_id="run_cancel")
    task = asyncio.ensure_future(rt.run(rid))
    for _ in range(500):
        await asyncio.sleep(0.02)
        state = await rt.state(rid)
        if any(c.name == "lookup" and c.result is not None for c in state.calls.values()):
            break
    await rt.cancel(rid, "user asked", by="ops")
    await task
    await rt.resume(rid, "try again")
    return rid


async def _timed_out(rt: stead.Runtime) -> str:
    now = [1_800_000_000.0]
    rt.clock = lambda: now[0]
    agent = stead.Agent(
        "slowpoke",
        ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 9, "cents": 999})]), "ok"]),
        [refund],
        limits=stead.Limits(approval_timeout=60),
    )
    rt.register(agent)
    rid = await rt.start(agent, "Refund 9", run_id="run_timed_out")
    await rt.run(rid)
    now[0] += 61
    await rt.expire_approvals()
    return rid


_WRITER = stead.Agent("writer", ScriptedModel(["A two-line note."] * 2))


@stead.tool(effect="idempotent_write")
async def draft(topic: str, ctx: stead.ToolContext) -> str:
    """Have a note drafted by the writer, from inside the tool."""
    return f"drafted: {await ctx.run_child(_WRITER, f'write about {topic}')}"


async def _children(rt: stead.Runtime) -> str:
    """A parent whose turn starts two child runs: one as an ``agent_tool`` call (the
    child's output is the result, ``source="child"``), one from a handler's ``run_child``
    (the child's end runs the handler again, which records the result)."""
    agent = stead.Agent(
        "boss",
        ScriptedModel(
            [
                Reply(
                    tool_calls=[
                        ("writer", {"task": "Write the note."}),
                        ("draft", {"topic": "tides"}),
                    ]
                ),
                "Both notes are in.",
            ]
        ),
        [stead.agent_tool(_WRITER), draft],
    )
    rt.register(agent)
    rid = await rt.start(agent, "Get me two notes.", run_id="run_children")
    await rt.run(rid)
    return rid


SCENARIOS: dict[str, Callable[[stead.Runtime], Awaitable[str]]] = {
    "basic": _basic,
    "approval": _approval,
    "failures": _failures,
    "budget": _budget,
    "cancel_resume": _cancel_resume,
    "timed_out": _timed_out,
    "children": _children,
}


def plain(value: Any) -> Any:
    """An event's fields as plain JSON, by walking the dataclasses (not through the codec,
    so a change of the codec cannot change what the golden file expects)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        kind = getattr(value, "kind", None)
        if isinstance(kind, str):
            out["kind"] = kind
        return out
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _every_kind() -> dict[str, Any]:
    """One event of every kind, each row as the store writes it (not a valid log: the rows
    are decoded one by one)."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "store"))
    from _builders import every_kind  # type: ignore[import-not-found]

    from stead.store.sql._base import event_row

    rows, fields = [], []
    for seq, event in enumerate(every_kind(), start=1):
        kind, version, _turn, _call, data = event_row(event)
        rows.append([seq, kind, version, _text(data)])
        fields.append(plain(event))
    return {"rows": rows, "snapshot": None, "fields": fields}


def _text(data: str | bytes) -> str:
    """A row's JSON text (a large row is stored compressed since migration 0005)."""
    from stead.store.sql._base import unpack_data

    data = unpack_data(data)
    return data.decode("utf-8") if isinstance(data, bytes) else data


def _rows(path: Path, rid: str) -> dict[str, Any]:
    db = sqlite3.connect(path)
    rows = db.execute(
        "SELECT seq, kind, version, data FROM events WHERE run_id = ? ORDER BY seq", (rid,)
    ).fetchall()
    snap = db.execute(
        "SELECT seq, version, state FROM snapshots WHERE run_id = ?", (rid,)
    ).fetchone()
    db.close()
    from stead.store.sql._store import unpack

    out: dict[str, Any] = {"rows": [[*r[:3], _text(r[3])] for r in rows], "snapshot": None}
    if snap is not None:
        out["snapshot"] = {
            "seq": snap[0],
            "version": snap[1],
            "state": unpack(snap[2]),  # checksummed since 8ddcde7; verified here
        }
    return out


def _commit() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()


async def write(file: str, commit: str) -> Path:
    HERE.mkdir(exist_ok=True)
    target = HERE / f"{file}.json"
    name = file.partition("-")[0]
    if name == "every_kind":
        doc = {"name": name, "written_by": commit, **_every_kind()}
        target.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        return target
    folder = Path(tempfile.mkdtemp())
    db = folder / "runs.db"
    async with stead.Runtime(f"sqlite:///{db}", snapshot_every=6) as rt:
        rid = await SCENARIOS[name](rt)
        state = await rt.state(rid)
    doc = {"name": name, "written_by": commit, **_rows(db, rid), "meaning": meaning(state)}
    target.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return target


if __name__ == "__main__":
    for n in sys.argv[1:] or [*SCENARIOS, "every_kind"]:
        print(asyncio.run(write(n, _commit())))
