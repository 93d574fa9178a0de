"""The overhead workload on LangGraph with its SQLite checkpointer, against the same floor.

    pip install -e '.[compare]'           # langgraph + langgraph-checkpoint-sqlite (optional)
    .venv/bin/python bench/vs_langgraph.py [--runs 30] [--rounds 7] [--dir PATH]

The same 21-step run as ``bench/overhead.py`` (10 model turns that each ask for one tool
call, the 10 tool calls, a final answer): a ``StateGraph`` over ``MessagesState`` with an
``agent`` node (a deterministic scripted reply, like stead's ``ScriptedModel``) and a
``ToolNode`` running the same lookup (sync: ``SqliteSaver`` is sync-only), compiled with
``SqliteSaver`` on a fresh file and invoked with ``durability="sync"`` (each super-step's
checkpoint is written before the next step starts: LangGraph's durable mode). That is 21
super-steps a run, so µs per step compare directly with ``overhead.py``'s figures. The floor
is the same one, measured in the same process. LangGraph's checkpointer configures SQLite
itself (its settings are kept, and printed with its commits and fsyncs a run). It records
no intent before a tool runs and cannot tell "ran" from "may have run".
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

import overhead

try:
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
except ImportError:  # pragma: no cover - an optional comparison
    sys.exit("needs langgraph and langgraph-checkpoint-sqlite: pip install -e '.[compare]'")


@lc_tool
def lookup(order_id: int) -> dict[str, Any]:
    """Look up an order by id (the same result as overhead.lookup; sync, because LangGraph's
    SQLite checkpointer is sync-only and so is this graph's invoke)."""
    return {"order_id": order_id, "status": "shipped", "carrier": "ups"}


def agent(state: MessagesState) -> dict[str, Any]:
    """Turn N (the number of AI messages so far) replies like the ScriptedModel's script."""
    turn = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
    if turn < overhead.TOOL_TURNS:
        call = {"name": "lookup", "args": {"order_id": 1000 + turn}, "id": f"call_{turn}_0"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content="All ten orders have shipped.")]}


def route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def graph(path: str) -> tuple[Any, sqlite3.Connection]:
    conn = sqlite3.connect(path, check_same_thread=False)
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=SqliteSaver(conn)), conn


def langgraph_run(app: Any) -> int:
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    out = app.invoke(
        {"messages": [HumanMessage(content=overhead.INPUT)]}, config, durability="sync"
    )
    ais = [m for m in out["messages"] if isinstance(m, AIMessage)]
    if len(ais) != overhead.TOOL_TURNS + 1:
        raise SystemExit(f"langgraph run took {len(ais)} model turns")
    return len(out["messages"])


async def langgraph_batch(runs: int, directory: str) -> float:
    path = os.path.join(directory, f"lg-{uuid.uuid4().hex}.db")
    app, conn = graph(path)
    try:
        langgraph_run(app)
        gc.collect()
        start = time.perf_counter()
        for _ in range(runs):
            langgraph_run(app)
        return time.perf_counter() - start
    finally:
        conn.close()
        overhead.remove_db(path)


def pragmas(directory: str) -> str:
    """LangGraph's SQLite settings, and the commits and fsyncs of one run (traced)."""
    path = os.path.join(directory, f"lg-{uuid.uuid4().hex}.db")
    counter = overhead.CommitCounter()
    with overhead.counting_connections(counter):
        app, conn = graph(path)
    try:
        langgraph_run(app)
        commits, fsyncs = counter.commits, counter.fsyncs
        langgraph_run(app)
        commits, fsyncs = counter.commits - commits, counter.fsyncs - fsyncs
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync = conn.execute("PRAGMA synchronous").fetchone()[0]
        return f"journal_mode={mode}, synchronous={sync}; {commits} commits, {fsyncs} fsyncs a run"
    finally:
        conn.close()
        overhead.remove_db(path)


async def measure(runs: int, rounds: int, directory: str) -> dict[str, list[float]]:
    sides = {"floor": overhead.floor_batch, "langgraph": langgraph_batch}
    stead_side = lambda r, d: overhead.stead_batch("read_only", r, d)  # noqa: E731
    sides["stead read_only"] = stead_side
    out: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            seconds = await sides[name](runs, directory)
            out[name].append(seconds / (runs * overhead.STEPS_PER_RUN) * 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dir")
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="stead-vs-lg-", dir=args.dir)
    try:
        settings = pragmas(directory)
        series = asyncio.run(measure(args.runs, args.rounds, directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    floor = statistics.median(series["floor"])
    fs = overhead.filesystem(directory)
    print(f"files in {directory} ({fs}); langgraph's SQLite: {settings}")
    print(f"{'side':<16} {'µs/step':>8} {'min':>7} {'max':>7} {'x floor':>8}")
    for name, xs in series.items():
        med = statistics.median(xs)
        print(f"{name:<16} {med:>8.1f} {min(xs):>7.1f} {max(xs):>7.1f} {med / floor:>7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
