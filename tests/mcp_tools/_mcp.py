"""Helpers for the MCP tests: ``mcp_server.py`` over stdio (a child process per
``MCPTools``) or over streamable HTTP on 127.0.0.1 (a child process per test)."""

from __future__ import annotations

import json
import os
import socket
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
        self, event: str, tool: str, n: int = 1, timeout: float = 30
    ) -> list[dict[str, object]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.rows(event, tool)
            if len(rows) >= n:
                return rows
            time.sleep(0.02)
        raise AssertionError(f"the server never wrote {n} {event} of {tool}: {self.rows()}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HttpServer:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER), "http", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(os.environ),
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    raise AssertionError(self.log.read_text()) from None
                time.sleep(0.05)
        raise AssertionError("the MCP HTTP server did not start")

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)
