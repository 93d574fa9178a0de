"""Child-process harness for crash and contention tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from _spawn import Spawned, python_popen

HERE = Path(__file__).parent
CHILD = HERE / "crash_child.py"


@dataclass
class Child:
    returncode: int
    out: dict[str, object] | None
    stderr: str


@dataclass
class Scenario:
    """Paths for one crash scenario and a way to run child processes against them."""

    store: str
    ledger: str
    url: str = ""
    """The children's store URL, when it is not the SQLite file ``store`` (PostgreSQL)."""

    def env(self, crash: str | None = None, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("STEAD_CRASH_AT", None)
        env["STEAD_TEST_EFFECTS"] = self.ledger
        if crash:
            env["STEAD_CRASH_AT"] = crash
        env.update(extra)
        return env

    def spawn(
        self, mode: str, kind: str, *args: str, crash: str | None = None, **extra: str
    ) -> subprocess.Popen[str]:
        """The child started, its output readable as it comes (``stdout.readline()``)."""
        return subprocess.Popen(
            [sys.executable, str(CHILD), self.url or f"sqlite:///{self.store}", mode, kind, *args],
            env=self.env(crash, **extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(
        self, mode: str, kind: str, *args: str, crash: str | None = None, **extra: str
    ) -> Child:
        """The child run to its end (forked from a warm parent: ``_spawn``)."""
        url = self.url or f"sqlite:///{self.store}"
        p = python_popen(CHILD, url, mode, kind, *args, env=self.env(crash, **extra))
        out, err = p.communicate(timeout=60)
        return finish(p, out, err)


def finish(p: Spawned | subprocess.Popen[str], out: str, err: str) -> Child:
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    return Child(p.returncode, json.loads(lines[-1]) if lines else None, err)


KILLED = -signal.SIGKILL
