"""What does durability cost per step? stead against a hand-written floor, in one process.

    .venv/bin/python bench/overhead.py             # 11 rounds x 30 runs per batch
    .venv/bin/python bench/overhead.py --quick     # a few runs: does it work at all
    .venv/bin/python bench/overhead.py --json      # machine-readable

A *durable step* is one effect: one model call or one tool call. Every run here is 10 tool
turns: 10 model turns that each ask for one tool call, the 10 tool calls, and 1 final model
turn, so 21 steps a run.

* **stead**: a ``Runtime`` on a fresh SQLite file (WAL, ``synchronous=FULL``, as stead
  configures it), an ``Agent`` with a ``ScriptedModel`` (no delay) and one async tool. One row
  per effect class of that tool: ``read_only``, ``idempotent_write``, ``non_idempotent`` (with
  a reconcile function: its durable ``tool_call_started`` rides in the intent's commit) and
  ``non_idem_no_rec`` (no reconcile function: ``tool_call_started`` is committed on its own
  before the handler runs, one more fsync per tool call, so the goal is not applied to it);
  and ``effects``: the ``read_only`` tool in the ``effects`` durability mode, whose goal is
  0.6x the floor (its steps are held in memory and written with the run's end: one commit
  and one fsync a run, where the floor commits and fsyncs once a step).
  Per run: ``rid = await rt.start(agent, input)`` then ``await rt.run(rid)``.
* **floor**: the same loop with no framework. It builds the same ``ModelRequest`` (growing
  message list) for the same ``ScriptedModel.complete``, awaits the same tool function, and
  after every step writes ONE row (the step's JSON) to a fresh SQLite file (WAL,
  ``synchronous=FULL``) in its own transaction; plus one row when the run is created, because
  stead also writes the run before it runs it. 22 commits a run.

Batches (one fresh file, one untimed warm-up run, then N timed runs back to back) are
interleaved in a rotating order for several rounds, because the machine is noisy; each side's
figure is the median over rounds of batch time / (N x 21). Commits and fsyncs per run are
counted in a separate, untimed run by tracing every statement on every SQLite connection: a
commit is a ``COMMIT`` closing a transaction that wrote, or a write outside any transaction;
it is an fsync of the WAL unless ``PRAGMA synchronous`` was NORMAL or OFF at that moment
(stead commits lease bookkeeping that way). WAL checkpoints add a few fsyncs on top. The
same run's WAL pages are counted too: the WAL is checkpointed and truncated before it, and the
frames in it after it are every page each commit changed (an fsync flushes the pages written
since the one before it, unsynced commits' included; an fsync of 16 pages costs more than one
of 1 on this VM's disk, though far less than 16 fsyncs).
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
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import stead
from stead.core.messages import Message, ToolResultMessage, UserMessage, message_to_json
from stead.providers import ModelCall, ModelRequest
from stead.testing import Reply, ScriptedModel

TOOL_TURNS = 10
STEPS_PER_RUN = 2 * TOOL_TURNS + 1
GOAL = 1.5
INPUT = "Check the ten open orders and tell me which have shipped."
SYSTEM = "You look up orders. Call lookup once per order, then answer in one line."
FLOOR = "floor"
VARIANTS = ("read_only", "idempotent_write", "non_idempotent", "non_idem_no_rec", "effects")
"""stead rows: the tool's effect class; the two non_idempotent rows differ in whether the
tool has a reconcile function; ``effects`` is the read_only row in the ``effects`` durability
mode (only the commits an effect depends on wait for the disk)."""
GOALS = {"effects": 0.6}
"""A row's own goal where it is not ``GOAL``: the effects mode fsyncs once a run, not once a
step as the floor does, so it must beat the floor."""
UNJUDGED = {"non_idem_no_rec": "n/a: +1 fsync/call, by design"}
"""Rows the goal does not apply to, and why: a non_idempotent tool without a reconcile
function commits its start record on its own, so that a crash before the handler ran leaves
a call that plainly never ran (run again, no person asked). The floor offers nothing like it."""


# -- the workload, shared by both sides ---------------------------------------------------


async def lookup(order_id: int) -> dict[str, Any]:
    """Look up an order by id."""
    return {"order_id": order_id, "status": "shipped", "carrier": "ups"}


def script() -> ScriptedModel:
    """10 turns that each call ``lookup`` once, then a final answer."""
    turns: list[Reply | str] = [
        Reply(tool_calls=[("lookup", {"order_id": 1000 + i})]) for i in range(TOOL_TURNS)
    ]
    turns.append("All ten orders have shipped.")
    return ScriptedModel(turns)


async def find_lookup(order_id: int) -> stead.Unknown:
    """Reconcile for the non_idempotent ``lookup``: never asked in this benchmark (nothing
    crashes); its presence is what lets the start record ride with the intent."""
    return stead.Unknown(reason="the benchmark never crashes")


def agent_for(variant: str) -> stead.Agent:
    """An agent whose only tool is ``lookup`` of the variant's side-effect class."""
    if variant == "effects":
        tool = stead.tool(effect="read_only", name="lookup")(lookup)
        return stead.Agent("bench-effects", script(), [tool], system=SYSTEM, durability="effects")
    if variant == "non_idem_no_rec":
        tool = stead.tool(effect="non_idempotent", name="lookup")(lookup)
    elif variant == "non_idempotent":
        tool = stead.tool(effect="non_idempotent", name="lookup", reconcile=find_lookup)(lookup)
    else:
        tool = stead.tool(effect=variant, name="lookup")(lookup)  # type: ignore[call-overload]
    return stead.Agent(f"bench-{variant}", script(), [tool], system=SYSTEM)


# -- commit counting ------------------------------------------------------------------------


class CommitCounter:
    """Counts write transactions that committed, and those of them that fsynced the WAL.

    ``tracker()`` gives each connection its own ``set_trace_callback`` hook (transaction and
    ``synchronous`` state are per connection); all of them add to the same totals. A commit
    fsyncs unless ``PRAGMA synchronous`` is NORMAL or OFF at that moment (with WAL, NORMAL
    leaves the sync to the next FULL commit or checkpoint).
    """

    def __init__(self) -> None:
        self.commits = 0
        self.fsyncs = 0

    def tracker(self) -> Callable[[str], None]:
        """A trace hook for one connection (which starts, as SQLite does, at FULL)."""
        state = {"txn": False, "wrote": False, "sync": True}

        def hook(statement: str) -> None:
            s = " ".join(statement.upper().split())
            if s.startswith("PRAGMA SYNCHRONOUS="):
                state["sync"] = s.split("=", 1)[1].strip("; ") not in ("0", "1", "OFF", "NORMAL")
            elif s.startswith("BEGIN"):
                state["txn"] = True
                state["wrote"] = "IMMEDIATE" in s or "EXCLUSIVE" in s
            elif s.startswith(("COMMIT", "END")):
                if state["txn"] and state["wrote"]:
                    self._commit(state["sync"])
                state["txn"] = False
            elif s.startswith("ROLLBACK"):
                state["txn"] = False
            elif s.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP")):
                if state["txn"]:
                    state["wrote"] = True
                else:
                    self._commit(state["sync"])  # autocommit: its own transaction

        return hook

    def _commit(self, synced: bool) -> None:
        self.commits += 1
        self.fsyncs += synced


@contextlib.contextmanager
def counting_connections(counter: CommitCounter) -> Iterator[None]:
    """Trace every SQLite connection opened inside the block (stead's store included)."""
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = real(*args, **kwargs)
        db.set_trace_callback(counter.tracker())
        return db

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield
    finally:
        sqlite3.connect = real


# -- stead ----------------------------------------------------------------------------------


async def stead_batch(effect: str, runs: int, directory: str) -> float:
    """Seconds for ``runs`` sequential runs on a fresh store (after one warm-up run)."""
    agent = agent_for(effect)
    path = os.path.join(directory, f"stead-{uuid.uuid4().hex}.db")
    rt = stead.Runtime(f"sqlite:///{path}", agents=[agent])
    try:
        await stead_run(rt, agent)
        gc.collect()
        start = time.perf_counter()
        for _ in range(runs):
            await stead_run(rt, agent)
        return time.perf_counter() - start
    finally:
        await rt.close()
        remove_db(path)


async def stead_run(rt: stead.Runtime, agent: stead.Agent) -> str:
    """One run, checked: it must complete after exactly 11 model turns."""
    rid = await rt.start(agent, INPUT)
    view = await rt.run(rid)
    if view.status is not stead.RunStatus.COMPLETED or view.turns != TOOL_TURNS + 1:
        raise SystemExit(f"stead run {rid} ended {view.status} after {view.turns} turns")
    return rid


async def stead_counts(effect: str, directory: str) -> dict[str, int]:
    """Commits and events of one run (after a warm-up run), traced, untimed."""
    agent = agent_for(effect)
    path = os.path.join(directory, f"stead-count-{uuid.uuid4().hex}.db")
    counter = CommitCounter()
    with counting_connections(counter):
        rt = stead.Runtime(f"sqlite:///{path}", agents=[agent])
    try:
        await stead_run(rt, agent)
        with contextlib.closing(sqlite3.connect(path)) as side:  # not traced: opened later
            empty_wal(side)
        commits, fsyncs = counter.commits, counter.fsyncs
        rid = await stead_run(rt, agent)
        commits, fsyncs = counter.commits - commits, counter.fsyncs - fsyncs
        pages = wal_pages(path)
        events = len(await rt.events(rid))
    finally:
        await rt.close()
        remove_db(path)
    return {"commits": commits, "fsyncs": fsyncs, "events": events, "pages": pages}


# -- the floor ------------------------------------------------------------------------------


def open_floor(path: str) -> sqlite3.Connection:
    """A fresh file, WAL, synchronous=FULL, autocommit: each INSERT is one transaction."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE steps (run_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, "
        "PRIMARY KEY (run_id, seq)) WITHOUT ROWID"
    )
    return db


async def floor_run(
    db: sqlite3.Connection,
    model: ScriptedModel,
    tool: Callable[..., Awaitable[Any]],
    schemas: tuple[Any, ...],
) -> int:
    """The loop stead runs, by hand: model, tool, one committed row per step. Returns steps."""
    run_id = f"run_{uuid.uuid4().hex}"
    signal = stead.AbortSignal()
    seq = 0

    def write(data: dict[str, Any]) -> None:
        nonlocal seq
        seq += 1
        db.execute("INSERT INTO steps VALUES (?, ?, ?)", (run_id, seq, json.dumps(data)))

    write({"agent": "floor", "input": INPUT})
    messages: list[Message] = [UserMessage(content=INPUT)]
    steps = 0
    turn = 0
    while True:
        request = ModelRequest(
            model=model.model_name,
            system=SYSTEM,
            messages=tuple(messages),
            tools=schemas,
            turn_index=turn,
        )
        response = await model.complete(ModelCall(request, signal))
        steps += 1
        messages.append(response.message)
        write({"message": message_to_json(response.message), "usage": response.usage.to_json()})
        if not response.message.tool_calls:
            return steps
        for call in response.message.tool_calls:
            content = json.dumps(await tool(**json.loads(call.arguments)))
            steps += 1
            messages.append(
                ToolResultMessage(tool_call_id=call.id, name=call.name, content=content)
            )
            write({"tool_call_id": call.id, "content": content})
        turn += 1


async def floor_batch(
    runs: int, directory: str, counter: CommitCounter | None = None, pages: list[int] | None = None
) -> float:
    """Seconds for ``runs`` sequential floor runs on a fresh file (after one warm-up run);
    with ``counter``, its statements traced, and with ``pages``, the WAL pages they wrote
    appended to it (both for the untimed counting run)."""
    path = os.path.join(directory, f"floor-{uuid.uuid4().hex}.db")
    db = open_floor(path)
    model = script()
    schemas = (agent_for("read_only").registry.get("lookup").schema(),)  # type: ignore[union-attr]
    try:
        await floor_run(db, model, lookup, schemas)
        if pages is not None:
            empty_wal(db)
        if counter is not None:
            db.set_trace_callback(counter.tracker())
        gc.collect()
        start = time.perf_counter()
        for _ in range(runs):
            steps = await floor_run(db, model, lookup, schemas)
            if steps != STEPS_PER_RUN:
                raise SystemExit(f"floor run took {steps} steps, not {STEPS_PER_RUN}")
        elapsed = time.perf_counter() - start
        if pages is not None:
            pages.append(wal_pages(path))
        return elapsed
    finally:
        db.close()
        remove_db(path)


async def floor_counts(directory: str) -> dict[str, int]:
    """Commits and rows of one floor run, traced, untimed."""
    counter = CommitCounter()
    pages: list[int] = []
    await floor_batch(1, directory, counter, pages)
    return {
        "commits": counter.commits,
        "fsyncs": counter.fsyncs,
        "events": counter.commits,
        "pages": pages[0],
    }


def empty_wal(db: sqlite3.Connection) -> None:
    """Checkpoint everything and truncate the WAL (between runs, untimed), so that the frames
    of the next run are all the WAL holds: ``wal_pages`` can count them."""
    busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise SystemExit("could not empty the WAL before counting a run's pages")


def wal_pages(path: str) -> int:
    """Pages (frames) in the WAL beside the database at ``path``: 24 bytes of frame header
    and one page each, after the WAL's own 32-byte header (sqlite.org/fileformat2.html).
    Right after ``empty_wal`` and one run, they are the pages that run wrote, every commit's
    own copy of each page it changed: what the fsyncs flushed."""
    with contextlib.suppress(FileNotFoundError), open(path + "-wal", "rb") as wal:
        header = wal.read(32)
        if len(header) == 32:
            page_size = int.from_bytes(header[8:12], "big")
            return (os.fstat(wal.fileno()).st_size - 32) // (24 + page_size)
    return 0


def remove_db(path: str) -> None:
    """Delete a database file and its WAL companions."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


# -- measuring and reporting ----------------------------------------------------------------


@dataclass
class Series:
    """One side's per-round figures."""

    name: str
    """floor, or the tool's effect class."""
    us_per_step: list[float] = field(default_factory=list)
    """One figure per round: batch seconds / (runs x steps) in microseconds."""
    counts: dict[str, int] = field(default_factory=dict)
    """commits, fsyncs, events (rows for the floor) and WAL pages of one run."""

    @property
    def median(self) -> float:
        """The figure reported for this side."""
        return statistics.median(self.us_per_step)


async def measure(
    runs: int, rounds: int, directory: str, progress: bool, variants: tuple[str, ...] = VARIANTS
) -> dict[str, Series]:
    names = (FLOOR, *variants)
    series = {n: Series(n) for n in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            if name == FLOOR:
                seconds = await floor_batch(runs, directory)
            else:
                seconds = await stead_batch(name, runs, directory)
            series[name].us_per_step.append(seconds / (runs * STEPS_PER_RUN) * 1e6)
        if progress:
            done = "  ".join(f"{n} {series[n].us_per_step[-1]:.0f}" for n in names)
            print(f"  round {r + 1}/{rounds}: µs/step  {done}", file=sys.stderr)
    series[FLOOR].counts = await floor_counts(directory)
    for name in variants:
        series[name].counts = await stead_counts(name, directory)
    return series


def filesystem(path: str) -> str:
    """The filesystem type holding ``path`` (from /proc/mounts; "?" elsewhere)."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    with contextlib.suppress(OSError), open("/proc/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            parts = line.split()
            point = parts[1].rstrip("/") + "/" if len(parts) > 2 else ""
            if point and (path + "/").startswith(point) and len(point) >= len(best):
                best, kind = point, parts[2]
    return kind


def report(series: dict[str, Series], args: argparse.Namespace, directory: str) -> dict[str, Any]:
    floor = series[FLOOR].median
    rows = []
    for s in series.values():
        pairs = zip(s.us_per_step, series[FLOOR].us_per_step, strict=True)
        rows.append(
            {
                "side": "floor" if s.name == FLOOR else "stead",
                "tool_effect": None if s.name == FLOOR else s.name,
                "us_per_step_median": round(s.median, 1),
                "us_per_step_min": round(min(s.us_per_step), 1),
                "us_per_step_max": round(max(s.us_per_step), 1),
                "us_per_step_rounds": [round(x, 1) for x in s.us_per_step],
                "ratio_to_floor": round(s.median / floor, 3),
                "ratio_of_mins": round(min(s.us_per_step) / min(series[FLOOR].us_per_step), 3),
                "paired_ratio_median": round(statistics.median(a / b for a, b in pairs), 3),
                "commits_per_run": s.counts["commits"],
                "fsyncs_per_run": s.counts["fsyncs"],
                "events_per_run": s.counts["events"],
                "wal_pages_per_run": s.counts["pages"],
                "goal_met": (
                    None
                    if s.name == FLOOR or s.name in UNJUDGED
                    else s.median / floor <= GOALS.get(s.name, GOAL)
                ),
                "goal_ratio": GOALS.get(s.name, GOAL),
                "goal_note": UNJUDGED.get(s.name),
                "noisy": max(s.us_per_step) > 2 * min(s.us_per_step),
            }
        )
    return {
        "workload": {
            "tool_turns": TOOL_TURNS,
            "steps_per_run": STEPS_PER_RUN,
            "step": "one effect: one model call or one tool call",
            "model": "ScriptedModel, no delay",
        },
        "runs_per_batch": args.runs,
        "rounds": args.rounds,
        "goal_ratio": GOAL,
        "environment": {
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
            "db_dir": directory,
            "db_filesystem": filesystem(directory),
        },
        "rows": rows,
    }


HEADER = """\
stead overhead: µs per durable step, stead vs a no-framework floor, measured in the same run
  step    one effect = one model call or one tool call. A run = 10 tool turns: 10 model turns
          that each request one tool call + 10 tool calls + 1 final model turn = 21 steps.
  stead   Runtime on a fresh SQLite file (WAL, synchronous=FULL), Agent with ScriptedModel
          (no delay) and one async tool of the effect class shown (non_idempotent: with a
          reconcile function; non_idem_no_rec: without, so its start record is a commit of
          its own); timed per run:
          rid = await rt.start(agent, input); await rt.run(rid)  (lease claim/release included)
          effects: the read_only tool in the effects durability mode (fsyncs at the end)
  floor   same ScriptedModel.complete (same growing ModelRequest) and same tool function,
          no framework; ONE row (the step's JSON) per step into a fresh SQLite file (WAL,
          synchronous=FULL), one commit per row, plus one row at run creation.
  method  {rounds} rounds x {runs} sequential runs per batch; fresh file + 1 untimed warm-up
          run per batch; batches interleaved in rotating order; figure = median over rounds
          of batch time / (runs x 21). commits, fsyncs: every SQLite statement traced over
          one extra run; a commit fsyncs the WAL unless synchronous was NORMAL/OFF for it.
          pages: WAL frames that run wrote (the WAL emptied before it), what its fsyncs flush.
  env     Python {python}, SQLite {sqlite}, {platform}
          files in {db_dir} ({db_filesystem}; fsync cost, hence the ratio, depends on it)
"""


def render(result: dict[str, Any]) -> str:
    env = result["environment"]
    lines = [
        HEADER.format(rounds=result["rounds"], runs=result["runs_per_batch"], **env),
        f"{'side':<6} {'tool effect':<17} {'µs/step':>8} {'min':>7} {'max':>7} "
        f"{'x floor':>8} {'paired':>7} {'mins':>6} {'commits':>8} {'fsyncs':>7} {'pages':>6} "
        f"{'events':>6}"
        f"  goal <= {GOAL}x",
    ]
    noisy = [r for r in result["rows"] if r["noisy"]]
    for row in result["rows"]:
        goal = {None: "", True: "met", False: "NOT met"}[row["goal_met"]] or (
            row["goal_note"] or ""
        )
        if goal and row["goal_ratio"] != GOAL:
            goal += f" (goal <= {row['goal_ratio']}x)"
        if goal and (row in noisy or result["rows"][0] in noisy):
            goal += " (noisy)"
        lines.append(
            f"{row['side']:<6} {row['tool_effect'] or '-':<17} "
            f"{row['us_per_step_median']:>8.1f} {row['us_per_step_min']:>7.1f} "
            f"{row['us_per_step_max']:>7.1f} {row['ratio_to_floor']:>7.2f}x "
            f"{row['paired_ratio_median']:>6.2f}x {row['ratio_of_mins']:>5.2f}x "
            f"{row['commits_per_run']:>8} {row['fsyncs_per_run']:>7} "
            f"{row['wal_pages_per_run']:>6} {row['events_per_run']:>6}"
            f"  {goal}"
        )
    lines.append(
        "x floor = ratio of the medians (the goal's figure); paired = median of the per-round\n"
        "ratios; mins = ratio of the fastest rounds. commits, fsyncs, pages and events are per\n"
        "run (pages: 4 KiB pages written to the WAL, each commit's copy of each page it\n"
        "changed; events of the floor = rows written). --json adds the per-round figures."
    )
    if noisy:
        lines.append(
            "NOISY: the slowest round of some side took over twice its fastest (another process "
            "using the CPU\nor the disk?); trust 'paired' and 'mins' more, or rerun with more "
            "--rounds."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="timed runs per batch (30)")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds (11)")
    parser.add_argument("--quick", action="store_true", help="3 runs x 2 rounds: a smoke test")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--sides",
        type=lambda text: [v.strip() for v in text.split(",") if v.strip()],
        default=list(VARIANTS),
        help=f"stead rows to measure, comma-separated (default all: {','.join(VARIANTS)}); "
        "the floor is always measured, the ratios need it",
    )
    parser.add_argument(
        "--dir",
        help="where the SQLite files go (default: a new temp dir; fsync cost depends "
        "on the filesystem, and on tmpfs it is nearly free)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.rounds = 3, 2
    if args.runs < 1 or args.rounds < 1:
        parser.error("--runs and --rounds must be at least 1")
    unknown = [v for v in args.sides if v not in VARIANTS]
    if unknown or not args.sides:
        parser.error(f"--sides takes some of {', '.join(VARIANTS)}, not {','.join(unknown)!r}")
    directory = tempfile.mkdtemp(prefix="stead-bench-", dir=args.dir)
    try:
        series = asyncio.run(
            measure(args.runs, args.rounds, directory, not args.json, tuple(args.sides))
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    result = report(series, args, directory)
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
