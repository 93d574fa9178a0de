"""Helpers for the MCP tests: ``mcp_server.py`` over stdio (a child process per
``MCPTools``) or over streamable HTTP on 127.0.0.1 (a child process per test)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SERVER = Path(__file__).parent / "mcp_server.py"


@dataclass
class Ledger:
    """What the MCP server did, one JSON line per event."""

    path: Path

    def rows(self, event: str | None = None, tool: str | None = None) -> list[dict[str, object]]:
        if not self.path.exists():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line]
        return [
            r
            for r in rows
            if (event is None or r["event"] == event) and (tool is None or r["tool"] == tool)
        ]

    def wait_for(
        self, event: str, tool: str, n: int = 1, timeout: float = 90
    ) -> list[dict[str, object]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.rows(event, tool)
            if len(rows) >= n:
                return rows
            time.sleep(0.02)
        raise AssertionError(f"the server never wrote {n} {event} of {tool}: {self.rows()}")


RUNNING = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@dataclass
class HttpServer:
    """``mcp_server.py`` over HTTP. The first start listens on a port the kernel picks (0,
    read back from uvicorn's log line), so parallel test workers never race for one; a start
    after ``kill`` reuses it, so ``url`` stays valid across restarts."""

    log: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        seen = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            process = self.process = subprocess.Popen(
                [sys.executable, str(SERVER), "http", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(os.environ),
            )
        deadline = time.monotonic() + 90  # a Python start-up can take this long under load
        while time.monotonic() < deadline:
            found = RUNNING.search(self.log.read_bytes()[seen:])
            if found:
                self.port = int(found.group(1))
                return
            if process.poll() is not None:
                raise AssertionError(self.log.read_text())
            time.sleep(0.05)
        raise AssertionError(f"the MCP HTTP server did not start: {self.log.read_text()}")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
