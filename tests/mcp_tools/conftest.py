"""Real MCP servers for the tests: ``mcp_server.py`` over stdio (a child process per
``MCPTools``) or over streamable HTTP on 127.0.0.1 (a child process per test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _mcp import HttpServer, Ledger


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    path = tmp_path / "mcp_ledger.jsonl"
    monkeypatch.setenv("STEAD_MCP_LEDGER", str(path))  # the stdio server inherits it
    return Ledger(path)


@pytest.fixture
def http_server(tmp_path: Path, ledger: Ledger) -> Iterator[HttpServer]:
    server = HttpServer(tmp_path / "http.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()
