"""Workers a distance away from PostgreSQL: steps a second, and round trips a durable step.

    .venv/bin/python bench/distance.py                   # 0, 2, 10, 50 ms; 100 and 1,000 in flight
    .venv/bin/python bench/distance.py --quick           # 0 and 10 ms, 20 in flight: does it work
    .venv/bin/python bench/distance.py --delays 0 10 --in-flight 100 --modes strict
    .venv/bin/python bench/distance.py --workers 1 2 4 --delays 0    # a fleet's size
    .venv/bin/python bench/distance.py --json            # the same figures, machine-readable

(``make distance`` runs the first line.)

**The distance.** Between the ``stead worker`` processes and PostgreSQL sits a small TCP proxy
(``Proxy``, on this process's event loop) that holds every chunk of bytes ``--delays`` D ms
before passing it on, in each direction: a round trip costs 2 D more than on the machine
(``tc netem`` would do it in the kernel; it is not available everywhere this runs). The
bench's own process (it enqueues the runs and counts the completed ones) talks to the server
directly.

**Round trips, counted.** The proxy reads PostgreSQL's wire protocol as it passes: a *round
trip* is a message that asks the server for an answer (a ``Sync``, or a simple ``Query``)
sent while the connection has no answer outstanding; what is sent while one is outstanding
(pipelined) rides in the same trip. A connection's start-up is counted apart. Each trip is
named by its first statement (a prepared statement's ``Bind`` by the text of its ``Parse``),
and ``--breakdown`` prints the trips by statement: where a durable step's round trips go.
``trips/step`` is every trip of every worker connection (the listener's too) over the
durable steps completed; a batch of many runs' appends (group commit) is one trip.

**The workload** is ``in_flight.py``'s: each run is 10 tool turns (a model call that asks for
one ``read_only`` lookup, the lookup) and a final answer, 21 durable steps; the model is
``ScriptedModel`` taking 50 ms a call. W workers with ``--concurrency N/W`` each keep N runs
in flight; ``--waves`` x N runs are enqueued at once once the workers are ready, and the clock
runs from the first enqueue until the last run completed. The *ideal* is latency-bound (a run
cannot take less than its 11 model calls): ``waves x 11 x 50 ms``; ``x ideal`` is wall over
it. ``vs 0 ms`` is steps/s over the same row's at D = 0, measured in the same invocation.

**A fleet** (``--workers 1 2 4 --per-worker 100 --share 0.25``): W workers with N runs in
flight each, every worker held to a share of a CPU (``_hosts.py`` says how and why); the
table adds steps/s over one worker's and the CPUs each side used.

**CPU a step** (``--workers``): the CPU time (``/proc/<pid>/stat``, user + system) of the
worker processes, of PostgreSQL's processes (the postmaster and its children) and of the
proxy's (this) process over the timed part, per durable step: what a step costs each side,
so a fleet can be sized; ``load`` is the machine's one-minute load average at the row's end.

PostgreSQL is a throwaway durable server from the machine's binaries (fsync on), a schema per
row. Wall-clock figures move with the machine's load: compare rows of one invocation; the
round trips do not depend on it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import shutil
import struct
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import _hosts
import stead
from _hosts import Fleet, children, cpu_seconds
from stead.testing import PostgresServer, Reply, ScriptedModel

TOOL_TURNS = 10
MODEL_CALLS = TOOL_TURNS + 1
STEPS_PER_RUN = TOOL_TURNS + MODEL_CALLS
LATENCY = 0.05
MODES = ("strict", "effects")


# -- the agents the workers serve (``--agents distance:agents``) ------------------------------


@stead.tool(effect="read_only")
async def lookup(order_id: int) -> dict[str, Any]:
    """Look up an order (no latency of its own)."""
    return {"order_id": order_id, "status": "shipped", "carrier": "ups"}


def agents() -> list[stead.Agent]:
    """One agent a durability mode, named after it: 10 tool turns and an answer."""
    turns: list[Reply | str] = [
        Reply(tool_calls=[("lookup", {"order_id": 1000 + i})]) for i in range(TOOL_TURNS)
    ]
    turns.append("All ten orders have shipped.")
    return [
        stead.Agent(mode, ScriptedModel(turns, delay=LATENCY), [lookup], durability=mode)  # type: ignore[arg-type]
        for mode in MODES
    ]


# -- the proxy --------------------------------------------------------------------------------

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104
_FRIENDLY = (
    ("WITH upd AS ( UPDATE runs SET last_seq", "append (one run)"),
    ("WITH b AS (SELECT * FROM unnest(", "append (a batch)"),
    ("UPDATE runs r SET lease_expires_at", "renew leases"),
    ("SELECT run_id, last_seq FROM runs WHERE run_id = ANY", "last seqs (keeper, watcher)"),
    ("WITH unheld AS (SELECT run_id, lease_owner", "claim"),
    ("WITH u AS (UPDATE runs r SET lease_owner = NULL", "release"),
    ("WITH r AS (SELECT r.run_id, r.agent", "load (row, snapshot, tail)"),
    ("SELECT run_id, agent, session_id, correlation_id, status", "a run's row"),
    ("SET ", "a new connection's settings"),
)


def name_of(text: str) -> str:
    """A statement's short name: a friendly one for those of a step, else its first words."""
    flat = " ".join(text.split())
    for prefix, name in _FRIENDLY:
        if flat.startswith(prefix):
            return name
    return flat[:60]


class Wire:
    """One proxied connection's protocol, read as it passes (counted, never changed)."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.up = bytearray()
        self.down = bytearray()
        self.started = False
        self.outstanding = 0
        self.names: dict[bytes, str] = {}
        self.pending: list[str] = []

    def client(self, data: bytes) -> None:
        self.up += data
        while True:
            if not self.started:
                if len(self.up) < 8:
                    return
                (n,) = struct.unpack_from("!i", self.up)
                if len(self.up) < n:
                    return
                code = struct.unpack_from("!i", self.up, 4)[0]
                del self.up[:n]
                if code in (_SSL_REQUEST, _GSS_REQUEST):
                    raise SystemExit("the proxy needs sslmode=disable and gssencmode=disable")
                self.started = True
                self.outstanding += 1
                self.counts.connects += 1
                continue
            if len(self.up) < 5:
                return
            kind = self.up[0:1]
            (n,) = struct.unpack_from("!i", self.up, 1)
            if len(self.up) < 1 + n:
                return
            body = bytes(self.up[5 : 1 + n])
            del self.up[: 1 + n]
            self.message(kind, body)

    def message(self, kind: bytes, body: bytes) -> None:
        if kind == b"P":  # Parse: name \0 text \0 ...
            name, _, rest = body.partition(b"\0")
            text = name_of(rest.partition(b"\0")[0].decode(errors="replace"))
            if name:
                self.names[name] = text
            self.pending.append(text)
        elif kind == b"B":  # Bind: portal \0 statement \0 ...
            statement = body.partition(b"\0")[2].partition(b"\0")[0]
            if statement:
                self.pending.append(self.names.get(statement, "?"))
        elif kind in (b"S", b"Q"):
            if kind == b"Q":
                self.pending.append(name_of(body.rstrip(b"\0").decode(errors="replace")))
            label = self.pending[0] if self.pending else "?"
            for text in self.pending:
                self.counts.statements[text] += 1
            self.pending = []
            if self.outstanding == 0:
                self.counts.trips += 1
                self.counts.by_trip[label] += 1
            self.outstanding += 1

    def server(self, data: bytes) -> None:
        self.down += data
        while len(self.down) >= 5:
            (n,) = struct.unpack_from("!i", self.down, 1)
            if len(self.down) < 1 + n:
                return
            if self.down[0:1] == b"Z":
                self.outstanding = max(0, self.outstanding - 1)
            del self.down[: 1 + n]


class Counts:
    def __init__(self) -> None:
        self.trips = 0
        self.connects = 0
        self.by_trip: collections.Counter[str] = collections.Counter()
        self.statements: collections.Counter[str] = collections.Counter()

    def snapshot(self) -> tuple[int, int, dict[str, int], dict[str, int]]:
        return self.trips, self.connects, dict(self.by_trip), dict(self.statements)


class Proxy:
    """127.0.0.1:<port> -> the server, each chunk held ``delay`` seconds in each direction."""

    def __init__(self, host: str, port: int, delay: float) -> None:
        self.target = (host, port)
        self.delay = delay
        self.counts = Counts()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        try:
            sr, sw = await asyncio.open_connection(*self.target)
        except OSError:
            cw.close()
            return
        wire = Wire(self.counts)
        try:
            await asyncio.gather(
                self._pump(cr, sw, wire.client), self._pump(sr, cw, wire.server),
                return_exceptions=True,
            )  # fmt: skip
        except asyncio.CancelledError:
            pass  # the bench's loop is ending: nothing left to pass on
        finally:
            for w in (cw, sw):
                w.close()

    async def _pump(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, see: Any) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    w.close()
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                w.write(chunk)
                await w.drain()

        sender = asyncio.create_task(deliver())
        try:
            while chunk := await r.read(1 << 16):
                see(chunk)
                queue.put_nowait((loop.time() + self.delay, chunk))
        finally:
            queue.put_nowait((0.0, b""))
            await asyncio.wait([sender])


# -- processes, CPU and the store -------------------------------------------------------------


def with_options(url: str, **options: str) -> str:
    sep = "&" if "?" in url else "?"
    return url + sep + "&".join(f"{k}={v}" for k, v in options.items())


def fresh_schema(url: str) -> str:
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    return with_options(url, options=f"-csearch_path%3D{schema}")


# -- one row ----------------------------------------------------------------------------------


async def row(
    server: PostgresServer, delay_ms: float, n: int, workers: int, mode: str,
    waves: int, tmp: Path, share: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Steps a second and round trips a step of ``waves x n`` runs in ``mode``, ``n`` in
    flight over ``workers`` worker processes ``delay_ms`` away from the server (each held to
    ``share`` of a CPU: ``_hosts.Shares``)."""
    import psycopg

    direct = fresh_schema(server.url)
    proxy = Proxy("127.0.0.1", server.port, delay_ms / 1000)
    await proxy.start()
    far = direct.replace(f"127.0.0.1:{server.port}", f"127.0.0.1:{proxy.port}")
    far = with_options(far, sslmode="disable", gssencmode="disable")
    runs = waves * n
    fleet = Fleet(far, workers, -(-n // workers), tmp, agents="distance:agents", share=share)
    count = await psycopg.AsyncConnection.connect(direct, autocommit=True)
    try:
        await fleet.ready()
        rt = stead.Runtime(direct, agents=agents())
        try:
            await rt.list_runs(limit=1)
            before = proxy.counts.snapshot()
            pg_pids = children(server.pid)
            worker_pids = [p.pid for p in fleet.procs]
            cpu0 = (cpu_seconds(worker_pids), cpu_seconds(pg_pids), time.process_time())
            held0 = fleet.shares.throttling()
            start = time.perf_counter()
            for first in range(0, runs, 100):
                await asyncio.gather(
                    *(
                        rt.start(mode, f"check batch {i}")
                        for i in range(first, min(runs, first + 100))
                    )
                )
            while True:
                cur = await count.execute("SELECT count(*) FROM runs WHERE status = 'completed'")
                got = await cur.fetchone()
                if got is not None and got[0] >= runs:
                    break
                if time.perf_counter() - start > 900:
                    raise SystemExit(f"only {got} of {runs} runs completed in 15 minutes")
                await asyncio.sleep(0.05)
            wall = time.perf_counter() - start
            pg_pids = sorted(set(pg_pids) | set(children(server.pid)))
            cpu1 = (cpu_seconds(worker_pids), cpu_seconds(pg_pids), time.process_time())
            held1 = fleet.shares.throttling()
            after = proxy.counts.snapshot()
        finally:
            await rt.close()
    finally:
        await fleet.stop()
        await count.close()
        await proxy.close()
    steps = runs * STEPS_PER_RUN
    ideal = waves * MODEL_CALLS * LATENCY
    by_trip = collections.Counter(after[2])
    by_trip.subtract(before[2])
    return {
        "delay_ms": delay_ms,
        "in_flight": n,
        "workers": workers,
        "mode": mode,
        "runs": runs,
        "wall_s": wall,
        "ideal_s": ideal,
        "steps_per_s": steps / wall,
        "x_ideal": wall / ideal,
        "trips_per_step": (after[0] - before[0]) / steps,
        "connects": after[1] - before[1],
        "trips_by_statement": {k: v / steps for k, v in by_trip.most_common() if v},
        "cpu_us_per_step": {
            "workers": (cpu1[0] - cpu0[0]) / steps * 1e6,
            "postgres": (cpu1[1] - cpu0[1]) / steps * 1e6,
            "proxy": (cpu1[2] - cpu0[2]) / steps * 1e6,
        },
        "load": os.getloadavg()[0],
        **fleet.figures(held1, held0, cpu1, cpu0, wall),
    }


def line(r: dict[str, Any], base: dict[str, Any] | None) -> str:
    cpu = r["cpu_us_per_step"]
    vs = f"{r['steps_per_s'] / base['steps_per_s']:>6.2f}x" if base else f"{'':>7}"
    return (
        f"{r['delay_ms']:>5g} {r['in_flight']:>6} {r['workers']:>3} {r['mode']:<8}"
        f" {r['runs']:>5} {r['wall_s']:>7.2f} {r['steps_per_s']:>8.0f} {vs}"
        f" {r['x_ideal']:>6.1f}x {r['trips_per_step']:>6.2f}"
        f" {cpu['workers']:>7.0f} {cpu['postgres']:>6.0f} {cpu['proxy']:>6.0f} {r['load']:>5.1f}"
    )


HEAD = (
    f"{'ms':>5} {'flight':>6} {'w':>3} {'mode':<8} {'runs':>5} {'wall s':>7} {'steps/s':>8}"
    f" {'vs 0ms':>7} {'ideal':>7} {'trips':>6} {'cpu:wk':>7} {'pg':>6} {'proxy':>6} {'load':>5}"
)


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    base: dict[tuple[int, int, str], dict[str, Any]] = {}
    alone: dict[tuple[str, float], dict[str, Any]] = {}  # the fleet's first row, by mode and D
    tmp = Path(tempfile.mkdtemp(prefix="stead-distance-"))
    if not args.json:
        print(
            f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()};"
            f" {LATENCY * 1000:.0f} ms a model call, {STEPS_PER_RUN} durable steps a run,"
            f" {args.waves} waves; cpu: us a step (workers, PostgreSQL, the proxy)"
        )
        if args.per_worker:
            print(_hosts.describe(args.share, "each worker"))
            print(_hosts.describe(args.pg_share, "PostgreSQL (all its processes)"))
        print(_hosts.HEAD if args.per_worker else HEAD)
    held = _hosts.Shares(args.pg_share)
    try:
        with PostgresServer(durable=True, max_connections=300) as server:
            held.place(*children(server.pid))
            for n in [0] if args.per_worker else args.in_flight:
                for w in args.workers:
                    for mode in args.modes:
                        for d in args.delays:
                            flight = args.per_worker * w if args.per_worker else n
                            r = await row(server, d, flight, w, mode, args.waves, tmp, args.share)
                            r["pg_share"] = held.applied
                            rows.append(r)
                            key = (n, w, mode)
                            if d == 0:
                                base[key] = r
                            b = base.get(key) if d else None
                            if b is not None:
                                r["vs_0ms"] = r["steps_per_s"] / b["steps_per_s"]
                            if not args.json:
                                first = alone.setdefault((mode, d), r)
                                out = _hosts.line(r, first) if args.per_worker else line(r, b)
                                print(out, flush=True)
                                if args.breakdown:
                                    for k, v in r["trips_by_statement"].items():
                                        print(f"{'':>12}{v:>7.3f}  {k}")
    finally:
        held.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--delays", type=float, nargs="+", default=[0, 2, 10, 50], help="ms each way")
    p.add_argument("--in-flight", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--workers", type=int, nargs="+", default=[1])
    p.add_argument(
        "--per-worker", type=int, default=0, metavar="N",
        help="a fleet's table: N runs in flight a worker (W workers: N x W), not --in-flight",
    )  # fmt: skip
    p.add_argument(
        "--share", type=float, default=None, metavar="CPUS",
        help="hold each worker to this share of a CPU (cgroup v1 cpu; see bench/_hosts.py)",
    )  # fmt: skip
    p.add_argument(
        "--pg-share", type=float, default=None, metavar="CPUS",
        help="hold PostgreSQL (all its processes) to this share of a CPU",
    )  # fmt: skip
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--waves", type=int, default=2, help="runs = waves x in flight")
    p.add_argument("--breakdown", action="store_true", help="round trips a step by statement")
    p.add_argument("--quick", action="store_true", help="0 and 10 ms, 20 in flight, one wave")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.delays, args.in_flight, args.waves = [0, 10], [20], 1
    return args


if __name__ == "__main__":
    ns = parse(None)
    out = asyncio.run(main(ns))
    if ns.json:
        print(json.dumps(out, indent=2))
