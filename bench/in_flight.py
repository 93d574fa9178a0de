"""Many runs in flight in one process: durable steps a second, against the latency-bound ideal.

(Not ``bench/concurrent.py``: that name would shadow the standard library's ``concurrent``
package for every script of this folder, which is first on their sys.path.)

    .venv/bin/python bench/in_flight.py                 # 100 and 1,000 in flight, every side
    .venv/bin/python bench/in_flight.py --quick         # 20 in flight, fewer sides: does it work
    .venv/bin/python bench/in_flight.py --in-flight 100 --sides stead-sqlite,langgraph
    .venv/bin/python bench/in_flight.py --json          # the same figures, machine-readable
    .venv/bin/python bench/in_flight.py --count         # and SQLite commits/fsyncs a step
    .venv/bin/python bench/in_flight.py --budget 120    # give each side at most 120 s
    .venv/bin/python bench/in_flight.py --in-process --sides stead-sqlite   # to profile it

(``make concurrent`` installs the optional ``compare`` extra, LangGraph and DBOS, and runs the
first line; without them their rows say so.)

**The workload** is the same for every system: each run is 10 tool turns
(a model call that asks for one ``read_only`` lookup, the lookup) and a final model turn, so
21 *durable steps* (one model call or one tool call, its outcome persisted before the next
step). The model takes ``--latency`` (50 ms) a call and does nothing else; the tool is an async
function with no latency of its own. Everything runs in this one process, on one event loop.

**In flight**: ``--in-flight N`` runs are kept going at once (a semaphore of N) until
``--waves`` x N runs have completed; the clock runs from the first start to the last
completion, and includes starting each run (for stead, its durable ``run_created``; for DBOS,
its enqueue). The *ideal* is latency-bound: a run cannot take less than 11 model calls, so
``waves x 11 x latency`` seconds for them all; ``wall / ideal`` is how far from it each side
is, and ``steps/s`` is ``runs x 21 / wall``.

**Sides.**
- ``stead-sqlite``: a ``Runtime`` on a fresh SQLite file (WAL, ``synchronous=FULL``); runs
  started with ``rt.start`` and driven with ``rt.run``, all at once.
- ``stead-postgres``: the same on a throwaway PostgreSQL server from the machine's binaries
  (``temporary_postgres``, fsync on), or ``STEAD_BENCH_POSTGRES_URL``.
- ``stead-*-effects``: the same in the ``effects`` durability mode (on a tree without that
  mode the row says it is not there).
- ``langgraph``: a ``StateGraph`` (an async ``agent`` node sleeping the model latency, a
  ``ToolNode`` with the same async lookup) compiled with ``AsyncSqliteSaver`` on a fresh file
  and invoked with ``durability="sync"`` (each super-step's checkpoint written before the next).
- ``dbos``: a DBOS workflow on its SQLite system database, one ``@DBOS.step`` per model call and
  per tool call, the runs enqueued on a ``Queue`` without a concurrency limit and awaited through
  their handles (DBOS's own queue polling, default settings).

**Each side in a process of its own** (a child of this one, unless ``--in-process``): a side
that raises or crashes is a row saying so (``failed:`` and the error's first line), one that
takes longer than ``--budget`` seconds (default 600) is killed and its row says ``did not
finish in N s``; neither ends the bench. It also keeps the sides apart: one side's threads,
leftover tasks or heap (which every cyclic garbage collection of the next side would walk)
never reach another's.

``--tune-gc``: each side's process calls ``stead.runtime.tune_gc()`` (what ``stead worker``
does) once set up, just before its clock starts: the garbage collector's young threshold
raised and the setup frozen; LangGraph and DBOS get it too.

**Columns.** ``cpu us/step`` is the CPU time of the side's process over the timed part, per
step: on a loaded machine it moves far less than the wall clock, so compare it when the
machine is busy. ``gc %`` is the share of that CPU spent in Python's cyclic garbage collector
(timed by ``gc.callbacks``).

**The model stand-in** is, for every side, an ``asyncio.sleep`` of the latency and a reply
built once: for stead ``SleepModel`` below (``--model scripted`` uses
``stead.testing.ScriptedModel`` instead, whose abortable wait costs a task, two futures and a
timer a call: it shows what a stand-in costs).

Figures move with the machine; compare sides measured in the same run only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import stead
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.providers import ModelCall, ModelResponse
from stead.testing import Reply, ScriptedModel, temporary_postgres

TOOL_TURNS = 10
STEPS_PER_RUN = 2 * TOOL_TURNS + 1
MODEL_CALLS = TOOL_TURNS + 1
INPUT = "Check the ten open orders and tell me which have shipped."
ANSWER = "All ten orders have shipped."
SIDES = (
    "stead-sqlite",
    "stead-sqlite-effects",
    "stead-postgres",
    "stead-postgres-effects",
    "langgraph",
    "dbos",
)


HERE = os.path.abspath(__file__)
"""This script, which ``child_row`` runs once a side."""


class Unavailable(Exception):
    """A side that cannot run here (an optional package missing, a mode not built yet)."""


async def lookup(order_id: int) -> dict[str, Any]:
    """Look up an order by id (no latency of its own)."""
    return {"order_id": order_id, "status": "shipped", "carrier": "ups"}


TUNE_GC = False
"""``--tune-gc``: every side's process runs ``stead.runtime.tune_gc()`` before its clock starts."""

CLOCKS: dict[str, float] = {}
"""CPU seconds and seconds of cyclic garbage collection of the last ``in_flight``."""


async def in_flight(n: int, total: int, one: Callable[[int], Awaitable[None]]) -> float:
    """Seconds to complete ``total`` runs with at most ``n`` in flight at once (and, in
    ``CLOCKS``, the CPU time of this process and of its garbage collections meanwhile)."""
    gate = asyncio.Semaphore(n)

    async def gated(i: int) -> None:
        async with gate:
            await one(i)

    collecting = [0.0, 0.0]  # (start of the collection under way, total)

    def timed(phase: str, _: dict[str, Any]) -> None:
        if phase == "start":
            collecting[0] = time.thread_time()
        else:
            collecting[1] += time.thread_time() - collecting[0]

    gc.collect()
    if TUNE_GC:
        stead.runtime.tune_gc()  # after the side's setup and warm-up: they are frozen
    gc.callbacks.append(timed)
    cpu, start = time.process_time(), time.perf_counter()
    try:
        await asyncio.gather(*(gated(i) for i in range(total)))
        wall = time.perf_counter() - start
        CLOCKS.update(cpu_s=time.process_time() - cpu, gc_s=collecting[1])
    finally:
        gc.callbacks.remove(timed)
    return wall


# -- stead ------------------------------------------------------------------------------------


class SleepModel:
    """The model of every side: sleeps the latency, then gives the reply of its turn (the
    assistant messages the request holds), built once. What LangGraph's agent node and DBOS's
    model step do too; like them it does not listen for a cancel (the bench sends none)."""

    model_name = "bench"

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.replies = [
            ModelResponse(
                message=AssistantMessage(
                    tool_calls=(
                        ToolCall(
                            id=f"call_{turn}",
                            name="lookup",
                            arguments=json.dumps({"order_id": 1000 + turn}),
                        ),
                    ),
                    stop_reason="tool_use",
                ),
                usage=Usage(input_tokens=100, output_tokens=20),
                model="bench",
            )
            for turn in range(TOOL_TURNS)
        ]
        self.replies.append(
            ModelResponse(
                message=AssistantMessage(text=ANSWER, stop_reason="end_turn"),
                usage=Usage(input_tokens=100, output_tokens=20),
                model="bench",
            )
        )

    async def complete(self, call: ModelCall) -> ModelResponse:
        await asyncio.sleep(self.latency)
        turn = sum(1 for m in call.request.messages if isinstance(m, AssistantMessage))
        return self.replies[turn]


def stead_agent(latency: float, durability: str | None, model: str = "sleep") -> stead.Agent:
    turns: list[Reply | str] = [
        Reply(tool_calls=[("lookup", {"order_id": 1000 + i})]) for i in range(TOOL_TURNS)
    ]
    turns.append(ANSWER)
    tool = stead.tool(effect="read_only", name="lookup")(lookup)
    options: dict[str, Any] = {}
    if durability is not None:
        options["durability"] = durability
    provider: Any = (
        ScriptedModel(turns, delay=latency) if model == "scripted" else SleepModel(latency)
    )
    try:
        return stead.Agent("bench", provider, [tool], **options)
    except TypeError as e:
        raise Unavailable(f"no durability={durability!r} mode in this stead ({e})") from e


COUNTS: dict[str, int] = {}
"""Commits and fsyncs of the last stead-sqlite measurement (``--count``), else empty."""


async def stead_side(
    url: str,
    n: int,
    total: int,
    latency: float,
    mode: str | None,
    count: bool = False,
    model: str = "sleep",
) -> float:
    agent = stead_agent(latency, mode, model)
    rt = stead.Runtime(url, agents=[agent])
    COUNTS.clear()
    try:

        async def one(i: int) -> None:
            rid = await rt.start(agent, INPUT)
            view = await rt.run(rid)
            if view.status is not stead.RunStatus.COMPLETED or view.turns != MODEL_CALLS:
                raise SystemExit(f"stead run {rid} ended {view.status} after {view.turns} turns")

        await one(-1)  # warm-up, untimed
        if not count or not url.startswith("sqlite"):
            return await in_flight(n, total, one)
        # Every statement of the store's connections (its writer thread's too) traced: what
        # group commit saves, counted.
        from overhead import CommitCounter

        counter = CommitCounter()
        rt.store._trace(counter.tracker)  # type: ignore[attr-defined]
        wall = await in_flight(n, total, one)
        COUNTS.update(commits=counter.commits, fsyncs=counter.fsyncs)
        return wall
    finally:
        await rt.close()


# -- LangGraph ------------------------------------------------------------------------------


try:
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
except ImportError as e:  # pragma: no cover - an optional comparison
    LANGGRAPH: str | None = f"needs the compare extra: pip install -e '.[compare]' ({e})"
else:
    LANGGRAPH = None


def langgraph_graph(latency: float) -> Any:
    """The loop as a graph: an async agent node (the model latency) and a ToolNode."""

    async def agent(state: MessagesState) -> dict[str, Any]:
        await asyncio.sleep(latency)
        turn = sum(1 for m in state["messages"] if isinstance(m, AIMessage))
        if turn < TOOL_TURNS:
            call = {"name": "lookup", "args": {"order_id": 1000 + turn}, "id": f"call_{turn}"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content=ANSWER)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lc_tool(lookup)]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", langgraph_route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def langgraph_route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


async def langgraph_side(path: str, n: int, total: int, latency: float) -> float:
    if LANGGRAPH is not None:
        raise Unavailable(LANGGRAPH)
    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        app = langgraph_graph(latency).compile(checkpointer=saver)

        async def one(i: int) -> None:
            config = {"configurable": {"thread_id": uuid.uuid4().hex}}
            out = await app.ainvoke(
                {"messages": [HumanMessage(content=INPUT)]}, config, durability="sync"
            )
            ais = [m for m in out["messages"] if isinstance(m, AIMessage)]
            if len(ais) != MODEL_CALLS:
                raise SystemExit(f"langgraph run took {len(ais)} model turns")

        await one(-1)
        return await in_flight(n, total, one)


# -- DBOS -------------------------------------------------------------------------------------


try:
    from dbos import DBOS
except ImportError as e:  # pragma: no cover - an optional comparison
    DBOS_MISSING: str | None = f"needs the compare extra: pip install -e '.[compare]' ({e})"
else:
    DBOS_MISSING = None
    LATENCY = {"s": 0.05}

    @DBOS.step()
    async def dbos_model(turn: int) -> dict[str, Any]:
        await asyncio.sleep(LATENCY["s"])
        if turn < TOOL_TURNS:
            return {"tool": "lookup", "args": {"order_id": 1000 + turn}}
        return {"text": ANSWER}

    @DBOS.step()
    async def dbos_tool(args: dict[str, Any]) -> dict[str, Any]:
        return await lookup(**args)

    @DBOS.workflow()
    async def dbos_run(prompt: str) -> str:
        for turn in range(MODEL_CALLS):
            reply = await dbos_model(turn)
            if "text" in reply:
                return str(reply["text"])
            await dbos_tool(reply["args"])
        raise RuntimeError("no answer")


@contextlib.asynccontextmanager
async def dbos_app(path: str, latency: float) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    """DBOS launched on a fresh SQLite system database; yields enqueue-and-await-one-run."""
    if DBOS_MISSING is not None:
        raise Unavailable(DBOS_MISSING)
    LATENCY["s"] = latency
    url = f"sqlite:///{path}"
    DBOS(config={"name": "stead-bench", "system_database_url": url, "log_level": "WARNING"})
    DBOS.launch()
    try:
        await DBOS.register_queue_async(
            "stead-bench"
        )  # no concurrency limit; DBOS's default polling

        async def enqueue_and_wait() -> Any:
            handle = await DBOS.enqueue_workflow_async("stead-bench", dbos_run, INPUT)
            return await handle.get_result()

        yield enqueue_and_wait
    finally:
        DBOS.destroy()


async def dbos_side(path: str, n: int, total: int, latency: float) -> float:
    async with dbos_app(path, latency) as enqueue_and_wait:

        async def one(i: int) -> None:
            if await enqueue_and_wait() != ANSWER:
                raise SystemExit("dbos run did not answer")

        await one(-1)
        return await in_flight(n, total, one)


# -- the table --------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    url = os.environ.get("STEAD_BENCH_POSTGRES_URL")
    if url:
        yield url
        return
    with temporary_postgres(durable=True, max_connections=300) as url:
        yield url


async def measure(side: str, n: int, args: argparse.Namespace, tmp: str, pg: str | None) -> float:
    total = n * args.waves
    path = os.path.join(tmp, f"{side}-{uuid.uuid4().hex}.db")
    if side.startswith("stead-"):
        mode = "effects" if side.endswith("-effects") else None
        if side.startswith("stead-postgres"):
            if pg is None:
                raise Unavailable("no PostgreSQL here")
            url = fresh_schema(pg)
        else:
            url = f"sqlite:///{path}"
        return await stead_side(url, n, total, args.latency, mode, args.count, args.model)
    if side == "langgraph":
        return await langgraph_side(path, n, total, args.latency)
    if side == "dbos":
        return await dbos_side(path, n, total, args.latency)
    raise SystemExit(f"unknown side {side!r}: choose from {', '.join(SIDES)}")


def fresh_schema(pg: str) -> str:
    """A URL of the server with a search_path of a new schema (each measurement its own)."""
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in pg else "?"
    return f"{pg}{sep}options=-csearch_path%3D{schema}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'in flight':>9}  {'side':<24} {'runs':>6} {'wall s':>8} {'steps/s':>9} {'x ideal':>8}"
        f" {'cpu us/step':>11} {'gc %':>5}"
    ]
    for r in rows:
        why = next((f"{k}: {r[k]}" for k in ("skipped", "failed") if k in r), None)
        if why is None and "unfinished" in r:
            why = r["unfinished"]
        if why is not None:
            label = why.replace("skipped: ", "n/a: ")
            lines.append(
                f"{r['in_flight']:>9}  {r['side']:<24} {'':>6} {'':>8} {'':>9} {'':>8}  {label}"
            )
            continue
        counted = ""
        if "fsyncs_per_step" in r:
            counted = (
                f"  {r['commits_per_step']:.2f} commits, {r['fsyncs_per_step']:.2f} fsyncs a step"
            )
        cpu = f"{r['cpu_us_per_step']:>11.0f} {r['gc_share'] * 100:>4.0f}%" if "cpu_s" in r else ""
        lines.append(
            f"{r['in_flight']:>9}  {r['side']:<24} {r['runs']:>6} {r['wall_s']:>8.2f} "
            f"{r['steps_per_s']:>9.0f} {r['x_ideal']:>7.1f}x {cpu}{counted}"
        )
    return "\n".join(lines)


def first_line(exc: BaseException) -> str:
    """``Type: the first line of the message``: what a row says of a side that failed."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


async def side_row(
    side: str, n: int, args: argparse.Namespace, tmp: str, pg: str | None
) -> dict[str, Any]:
    """Measure one side at ``n`` in flight, in this process; its row (a failure included)."""
    row: dict[str, Any] = {"in_flight": n, "side": side}
    COUNTS.clear()
    CLOCKS.clear()
    try:
        wall = await measure(side, n, args, tmp, pg)
    except Unavailable as e:
        row["skipped"] = str(e)
        return row
    except (Exception, SystemExit) as e:  # a side that fails is a row, never the bench's end
        row["failed"] = first_line(e)
        return row
    runs = n * args.waves
    steps = runs * STEPS_PER_RUN
    ideal = args.waves * MODEL_CALLS * args.latency
    row.update(
        runs=runs,
        wall_s=wall,
        ideal_s=ideal,
        steps_per_s=steps / wall,
        x_ideal=wall / ideal,
    )
    if CLOCKS:
        row.update(
            cpu_s=CLOCKS["cpu_s"],
            cpu_us_per_step=CLOCKS["cpu_s"] / steps * 1e6,
            gc_share=CLOCKS["gc_s"] / CLOCKS["cpu_s"] if CLOCKS["cpu_s"] else 0.0,
        )
    if COUNTS:
        row.update(
            commits_per_step=COUNTS["commits"] / steps,
            fsyncs_per_step=COUNTS["fsyncs"] / steps,
        )
    return row


async def child_row(
    side: str, n: int, args: argparse.Namespace, tmp: str, pg: str | None
) -> dict[str, Any]:
    """Measure one side in a child process of its own, killed after ``--budget`` seconds."""
    argv = [sys.executable, HERE, "--child", f"{side}:{n}", "--dir", tmp]
    argv += ["--waves", str(args.waves), "--latency", str(args.latency), "--model", args.model]
    argv += ["--count"] if args.count else []
    argv += ["--tune-gc"] if args.tune_gc else []
    env = dict(os.environ, STEAD_BENCH_CHILD_POSTGRES=pg or "")
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), args.budget)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return {"in_flight": n, "side": side, "unfinished": f"did not finish in {args.budget:g} s"}
    lines = out.decode(errors="replace").strip().splitlines()
    if proc.returncode == 0 and lines:
        try:
            row: dict[str, Any] = json.loads(lines[-1])
            return row
        except ValueError:
            pass
    said = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    why = said[-1].strip() if said else f"exit status {proc.returncode}"
    return {"in_flight": n, "side": side, "failed": f"{why} (exit status {proc.returncode})"}


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    sides = args.sides.split(",") if args.sides else list(SIDES)
    for side in sides:
        if side not in SIDES:
            raise SystemExit(f"unknown side {side!r}: choose from {', '.join(SIDES)}")
    rows: list[dict[str, Any]] = []
    tmp = tempfile.mkdtemp(prefix="stead-concurrent-", dir=args.dir)
    pg_cm = postgres() if any(s.startswith("stead-postgres") for s in sides) else None
    one = side_row if args.in_process else child_row
    try:
        with pg_cm if pg_cm is not None else contextlib.nullcontext() as pg:
            for n in args.in_flight:
                for side in sides:
                    row = await one(side, n, args, tmp, pg)
                    rows.append(row)
                    if not args.json:
                        print(table([row]).splitlines()[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--waves", type=int, default=2, help="runs = waves x in-flight")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds a model call")
    parser.add_argument("--sides", help=f"comma-separated, from {', '.join(SIDES)}")
    parser.add_argument("--dir", help="where the SQLite files go (default: the temp dir)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="20 in flight, one wave")
    parser.add_argument(
        "--count",
        action="store_true",
        help="stead on SQLite: count commits and fsyncs a step too (traces every statement)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=600.0,
        help="seconds a side may take (its process is then killed and its row says so)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="measure every side in this process, not each in a child (to profile one; no budget)",
    )
    parser.add_argument(
        "--model",
        choices=("sleep", "scripted"),
        default="sleep",
        help="stead's model stand-in: SleepModel, or stead.testing.ScriptedModel",
    )
    parser.add_argument(
        "--tune-gc",
        action="store_true",
        help="every side's process tunes its garbage collector first (stead.runtime.tune_gc)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)  # SIDE:N, run by child_row
    args = parser.parse_args(argv)
    global TUNE_GC
    TUNE_GC = args.tune_gc
    if args.quick:
        args.in_flight, args.waves = [20], 1
    return args


async def child(args: argparse.Namespace) -> None:
    """The child process of ``child_row``: one side, its row as the last line of stdout."""
    side, _, n = args.child.rpartition(":")
    pg = os.environ.get("STEAD_BENCH_CHILD_POSTGRES") or None
    row = await side_row(side, int(n), args, args.dir, pg)
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    ns = parse(None)
    if ns.child:
        asyncio.run(child(ns))
        sys.stdout.flush()
        os._exit(0)  # a peer's leftover threads (DBOS) must not hold the row back
    if not ns.json:
        print(
            f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"{ns.latency * 1000:.0f} ms a model call, {ns.waves} waves; one process a side"
            + ("; gc tuned (stead.runtime.tune_gc)" if ns.tune_gc else "")
        )
        print(table([]))
    result = asyncio.run(main(ns))
    if ns.json:
        print(json.dumps(result, indent=2))
    sys.exit(0)
