"""Processes for the server tests: a real ``stead serve`` (and real ``stead worker``s) per module.

Children are started with ``--port 0``; the server prints its URL once it listens. Stores
are a SQLite file or a PostgreSQL schema of the module's own (on the suite's server).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from _wait import until

HERE = Path(__file__).parent
TOKEN = "alice:" + "s3cret-for-the-tests-0123"
SECRET = TOKEN.split(":", 1)[1]
AGENTS = "_agents:agents"
SERVE_ARGS = ("--agents", AGENTS, "--port", "0", "--token", TOKEN, "--heartbeat", "0.5")
WORKER_ARGS = ("--agents", AGENTS, "--poll", "0.1", "--concurrency", "4", "--log-level", "WARNING")


STEAD = [str(Path(sys.executable).parent / "stead")]


def with_schema(url: str, schema: str) -> str:
    """``url`` with its search_path set to ``schema`` (as tests/conftest.py does)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


def _env(piddir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env["STEAD_TEST_PIDDIR"] = str(piddir)
    env.pop("STEAD_CRASH_AT", None)
    return env


class Stack:
    """Processes around one store: a server, optionally workers; an authorised client."""

    def __init__(self, store: str, piddir: Path) -> None:
        self.store = store
        self.piddir = piddir
        self.procs: list[subprocess.Popen[str]] = []
        self.url = ""
        self.client: httpx.Client | None = None
        self.log = piddir / "serve.log"

    def serve(self, *extra: str) -> str:
        """Start ``stead serve``; its output (access log included) goes to ``self.log``."""
        self.log = self.piddir / f"serve-{len(self.procs)}.log"
        out = self.log.open("w")
        proc = subprocess.Popen(
            [*STEAD, "--store", self.store, "serve", *SERVE_ARGS, *extra],
            env=_env(self.piddir),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        out.close()
        self.procs.append(proc)
        # 90 s: on a busy machine a server's start (imports, migrations, the worker) takes
        # tens of seconds; a serve that exits fails at once, without waiting this out.
        deadline = time.monotonic() + 90
        while not (found := re.search(r"stead serve: (http://\S+?/)", self.log.read_text())):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"stead serve did not start: {self.log.read_text()}")
            time.sleep(0.05)
        self.url = found.group(1).rstrip("/")
        self.client = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {SECRET}"}, timeout=20
        )
        return self.url

    def worker(self, **env: str) -> subprocess.Popen[str]:
        """Start ``stead worker`` (``env`` added to its environment)."""
        with (self.piddir / f"worker-{len(self.procs)}.log").open("w") as out:
            proc = subprocess.Popen(
                [*STEAD, "--store", self.store, "worker", *WORKER_ARGS],
                env={**_env(self.piddir), **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()


def sse_messages(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """Parse a server-sent event stream: one dict per message (comments as ``comment``)."""
    msg: dict[str, str] = {}
    for line in lines:
        if line == "":
            if msg:
                yield msg
            msg = {}
        elif line.startswith(":"):
            yield {"comment": line[1:].strip()}
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            msg[field] = msg[field] + "\n" + value if field in msg else value
    if msg:
        yield msg


def tool_group(pidfile: Path) -> int:
    """The process group of the tool that writes its id to ``pidfile`` when it starts
    (``_agents.py``'s sleeper), once it has."""
    until(lambda: pidfile.exists() and pidfile.read_text().strip(), "the tool started", timeout=20)
    return int(pidfile.read_text())


def group_gone(pgid: int) -> bool:
    """No process of the group is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def wait_for(client: httpx.Client, run_id: str, *statuses: str, timeout: float = 60) -> dict:
    """Poll the run until its status is one of ``statuses``; its detail. 60 s: a worker
    process that the module's stack has just started may still be importing stead."""
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/runs/{run_id}").json()
        if body["status"] in statuses:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} is {body['status']}, not {statuses}: {body}")
        time.sleep(0.05)
