"""A fleet of ``stead worker`` processes, each held to a share of a CPU, and the CPU each
process of a bench spends: what ``distance.py --workers`` measures a fleet with.

**Why a share.** On one machine the workers, PostgreSQL and the bench's own process (the
proxy, the enqueuing) share the same CPUs: a second worker process has no CPU to add once
one worker and the server fill them, so a fleet seems not to scale when it is the machine
that does not. Held to a fixed share of a CPU each (``--share 0.25``: a quarter), every
worker is a small host of its own: the workers are the bottleneck while PostgreSQL and the
proxy have CPU to spare, and 1, 2 and 4 workers at the same share show whether the fleet
scales. How much CPU PostgreSQL spends a step then says where the bottleneck moves next.

**How.** The cgroup v1 ``cpu`` controller (``/sys/fs/cgroup/cpu``, as root): a cgroup per
worker under one of the bench's, ``cpu.cfs_quota_us`` = share x ``cpu.cfs_period_us`` (a
20 ms period: a throttled worker waits at most about 15 ms, not the default's 75), each worker
moved into its own once started. ``cpu.stat`` tells how often the kernel held a worker back
(``throttled``: the share of periods in which the worker used up its quota, i.e. wanted more
CPU than its share). Where the controller is missing or not writable (not root, cgroup v2
only) the workers run uncapped and the bench says so (``Shares.why_not``).

**CPU a process spends** is ``/proc/<pid>/stat``'s user + system time (every thread);
PostgreSQL's is the postmaster's and every child's (its backends, WAL writer, checkpointer).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
STEAD = shutil.which("stead", path=str(Path(sys.executable).parent)) or "stead"
CPU_CONTROLLER = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 20_000
"""The scheduler's accounting period for a capped worker (the kernel's default is 100 ms)."""


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes (the ones still there), seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def children(pid: int) -> list[int]:
    """``pid`` and the processes whose parent it is (PostgreSQL's backends)."""
    found = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


class Shares:
    """A cgroup per worker, each held to ``share`` of a CPU (None: no cap)."""

    def __init__(self, share: float | None, root: Path = CPU_CONTROLLER) -> None:
        self.share = share
        self.why_not: str | None = None
        """Why the workers run uncapped although a share was asked for (else None)."""
        self.top: Path | None = None
        self.groups: list[Path] = []
        self.applied: float | None = None
        """The share each worker was held to (None: uncapped), after ``close`` too."""
        if share is None:
            return
        if not 0.01 <= share <= (os.cpu_count() or 1):
            raise SystemExit(f"--share {share}: a CPU share from 0.01 to the machine's CPUs")
        self.why_not = unavailable(root)
        if self.why_not is not None:
            return
        top = root / f"stead-fleet-{uuid.uuid4().hex[:8]}"
        try:
            top.mkdir()
        except OSError as exc:
            self.why_not = f"cannot make a cgroup under {root} ({exc.strerror})"
            return
        self.top = top
        self.applied = share

    def place(self, *pids: int) -> None:
        """Move these processes (every thread; their children to come too) into a cgroup of
        their own, which together they may use ``share`` of a CPU in."""
        if self.top is None or self.share is None:
            return
        group = self.top / f"group-{len(self.groups)}"
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(round(self.share * PERIOD_US)))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                (group / "cgroup.procs").write_text(str(pid))
        self.groups.append(group)

    def throttling(self) -> tuple[int, int]:
        """(periods in which a worker ran, periods in which it was held back), summed."""
        periods = throttled = 0
        for group in self.groups:
            stat = dict(
                line.split() for line in (group / "cpu.stat").read_text().splitlines() if line
            )
            periods += int(stat.get("nr_periods", 0))
            throttled += int(stat.get("nr_throttled", 0))
        return periods, throttled

    def close(self) -> None:
        """Remove the cgroups once their processes have ended (only an empty one goes)."""
        for group in [*self.groups, *([self.top] if self.top else [])]:
            with contextlib.suppress(OSError):
                group.rmdir()
        self.groups, self.top = [], None


def unavailable(root: Path = CPU_CONTROLLER) -> str | None:
    """Why no process can be held to a share of a CPU here (None: it can)."""
    if not (root / "cpu.cfs_quota_us").exists():
        return f"no cgroup v1 cpu controller at {root}"
    if not os.access(root, os.W_OK):
        return f"no cgroup can be made under {root} (not root)"
    return None


def describe(share: float | None, who: str) -> str:
    """What ``who`` (e.g. "each worker") is held to, or why not."""
    why_not = unavailable()
    if share is None:
        return f"{who}: uncapped"
    if why_not is not None:
        return f"{who}: uncapped: {why_not}"
    return f"{who}: {share:g} of a CPU (cgroup v1 cpu, {PERIOD_US} us period)"


class Fleet:
    """W ``stead worker`` processes on ``url`` serving ``agents`` (module:attr, found from
    ``cwd``), each held to ``share`` of a CPU (None: uncapped); their logs in ``logs``."""

    def __init__(
        self, url: str, n: int, concurrency: int, logs: Path, *,
        agents: str, share: float | None = None, cwd: Path = HERE,
    ) -> None:  # fmt: skip
        self.shares = Shares(share)
        self.logs = [logs / f"worker-{uuid.uuid4().hex[:6]}-{i}.log" for i in range(n)]
        self.procs: list[subprocess.Popen[bytes]] = []
        for log in self.logs:
            p = subprocess.Popen(
                [
                    STEAD, "--store", url, "worker", "--agents", agents,
                    "--concurrency", str(concurrency), "--poll", "0.05", "--lease-ttl", "60",
                    "--grace", "0",
                ],
                cwd=cwd, stdout=log.open("w"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            self.procs.append(p)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    async def ready(self) -> None:
        for _ in range(1200):
            for p, log in zip(self.procs, self.logs, strict=True):
                if p.poll() is not None:
                    raise SystemExit(f"a worker died:\n{log.read_text()[-3000:]}")
            if all(" ready: " in log.read_text() for log in self.logs):
                # Held to their share from here: an import at a quarter of a CPU is slow,
                # and the start-up is not what is measured.
                for p in self.procs:
                    self.shares.place(p.pid)
                return
            await asyncio.sleep(0.05)
        raise SystemExit("the workers did not start within a minute")

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after a minute; waited for on the event loop, which carries
        the workers' last statements through the proxy. Then their cgroups go."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _ in range(1200):
            if all(p.poll() is not None for p in self.procs):
                break
            await asyncio.sleep(0.05)
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.shares.close()

    def figures(
        self, held: tuple[int, int], held_before: tuple[int, int],
        cpu: tuple[float, float, float], cpu_before: tuple[float, float, float], wall: float,
    ) -> dict[str, Any]:  # fmt: skip
        """A row's fleet figures: the share each worker had, the share of periods its cgroup
        held it back in, and the CPUs each side used on average (workers, PostgreSQL, the
        bench's process) from the CPU seconds (``cpu``, ``cpu_before``) over ``wall``."""
        periods, throttled = (a - b for a, b in zip(held, held_before, strict=True))
        used = [(a - b) / wall for a, b in zip(cpu, cpu_before, strict=True)]
        return {
            "share": self.shares.applied,
            "throttled": throttled / periods if periods else None,
            "cpus": dict(zip(("workers", "postgres", "proxy"), used, strict=True)),
        }


HEAD = (
    f"{'w':>3} {'share':>5} {'flight':>6} {'mode':<8} {'ms':>4} {'steps/s':>8} {'x 1 w':>6}"
    f" {'us/step: wk':>11} {'pg':>5} {'proxy':>5}  {'CPUs: wk':>8} {'pg':>5} {'proxy':>5}"
    f" {'held':>5} {'trips':>6} {'load':>5}"
)
"""The fleet table's heading: ``x 1 w`` is steps/s over the first row's (one worker); ``us/step``
the CPU a durable step of the workers, of PostgreSQL and of the bench's process (the proxy);
``CPUs`` what each used on average; ``held`` the share of the workers' scheduling periods in
which their cgroup held them back (they wanted more than their share)."""


def line(r: dict[str, Any], first: dict[str, Any]) -> str:
    """One row of the fleet table (``first``: the row ``x 1 w`` divides by)."""
    cpu, used = r["cpu_us_per_step"], r["cpus"]
    share = "-" if r["share"] is None else f"{r['share']:g}"
    held = "-" if r["throttled"] is None else f"{r['throttled']:.0%}"
    return (
        f"{r['workers']:>3} {share:>5} {r['in_flight']:>6} {r['mode']:<8} {r['delay_ms']:>4g}"
        f" {r['steps_per_s']:>8.0f} {r['steps_per_s'] / first['steps_per_s']:>5.2f}x"
        f" {cpu['workers']:>11.0f} {cpu['postgres']:>5.0f} {cpu['proxy']:>5.0f}"
        f"  {used['workers']:>8.2f} {used['postgres']:>5.2f} {used['proxy']:>5.2f}"
        f" {held:>5} {r['trips_per_step']:>6.2f} {r['load']:>5.1f}"
    )
