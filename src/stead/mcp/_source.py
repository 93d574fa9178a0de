"""``MCPTools``: one MCP server as a source of tools for an ``Agent``."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stead.core.events import EffectClass
from stead.core.result_bound import check_max_result
from stead.errors import UserError
from stead.mcp._connection import MAX_PAGES, Connection, MCPServerError, ServerLost
from stead.mcp._tool import DEFAULT_TIMEOUT, MCPTool
from stead.tools import ApprovalPolicy, Reconciler, Tool


class MCPTools:
    """An MCP server's tools, listed when it is started (``async with`` or ``start``).

        async with MCPTools.stdio(sys.executable, ["files_server.py"], name="files") as files:
            agent = stead.Agent("helper", model, tools=files.tools())

    ``effects`` overrides the effect class the annotations give a tool (by its MCP name);
    ``reconcile`` attaches a reconcile function to a ``non_idempotent`` one, called like any
    tool's with (a subset of) its arguments by name and optionally a ``ToolContext``;
    ``requires_approval`` is per tool as in ``@tool``; ``rename`` maps an MCP name to the name
    the model sees (a name providers refuse, with dots or over 64 characters, needs one).
    A run records every tool's definition (``tools_listed``) when a drive starts and it
    differs from what the run recorded last. ``reconnect_within``: how long a server that
    went away is tried again before a call fails.

    Every request has a bounded time. ``timeout`` (seconds, 300 by default) bounds each
    ``tools/call``, ``timeouts`` per tool (by its MCP name) as ``@tool(timeout=...)`` does:
    past it the call is cancelled (``notifications/cancelled``) and fails, or, for a
    ``non_idempotent`` tool, whose call may have happened all the same, is left unknown for
    its reconcile function or a person. ``connect_timeout`` bounds starting the server and
    ``initialize``, ``list_timeout`` each ``tools/list`` page; a listing of more than
    ``max_pages`` pages, or one that gives a cursor twice, is refused. Those failures are
    ``MCPServerError``s (``ServerTimedOut`` for time) naming the server. ``max_result``
    bounds the characters of each result a run keeps (the agent's
    ``Limits.max_tool_result`` when None); a longer one is cut with a note the model reads.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        name: str,
        effects: Mapping[str, EffectClass] | None = None,
        reconcile: Mapping[str, Reconciler] | None = None,
        requires_approval: Mapping[str, bool | ApprovalPolicy] | None = None,
        rename: Mapping[str, str] | None = None,
        reconnect_within: float = 10.0,
        timeout: float = DEFAULT_TIMEOUT,
        timeouts: Mapping[str, float] | None = None,
        connect_timeout: float = 30.0,
        list_timeout: float = 30.0,
        max_pages: int = MAX_PAGES,
        max_result: int | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise UserError("MCPTools needs a name: the run's log records its tools under it")
        what = f"MCPTools {name!r}"
        for option, seconds in (
            ("reconnect_within", reconnect_within),
            ("timeout", timeout),
            ("connect_timeout", connect_timeout),
            ("list_timeout", list_timeout),
            *((f"timeouts[{k!r}]", v) for k, v in (timeouts or {}).items()),
        ):
            _check_seconds(what, option, seconds)
        if not isinstance(max_pages, int) or isinstance(max_pages, bool) or max_pages < 1:
            raise UserError(f"{what}: max_pages must be an int of at least 1, not {max_pages!r}")
        if max_result is not None:
            check_max_result(max_result, f"{what}: max_result")
        self.name = name
        self.reconnect_within = reconnect_within
        """Seconds a lost server is tried again (with a growing pause) before giving up."""
        self.timeout = timeout
        self._timeouts = dict(timeouts or {})
        self.max_result = max_result
        self.connection = Connection(
            connect,
            what=f"MCP server {name!r}",
            connect_timeout=connect_timeout,
            list_timeout=list_timeout,
            max_pages=max_pages,
        )
        self._effects = dict(effects or {})
        self._reconcile = dict(reconcile or {})
        self._approval = dict(requires_approval or {})
        self._rename = dict(rename or {})
        self._tools: list[MCPTool] = []
        self._lock: asyncio.Lock | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        **options: Any,
    ) -> MCPTools:
        """A server started as a child process, spoken to over its stdin and stdout. A
        server that dies is started again."""
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
        return cls(
            lambda: Client(params, mode="auto"),
            name=name or Path(args[0] if args else command).stem,
            **options,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> MCPTools:
        """A server at a streamable HTTP endpoint (``http://host:port/mcp``). A connection
        that breaks is made again. ``headers`` (an ``Authorization`` bearer token, say) go
        with every request and are never logged."""
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        @contextlib.asynccontextmanager
        async def connect() -> AsyncIterator[Any]:
            # The transport leaves a client it was given open: this one is closed here.
            http = create_mcp_http_client(headers=dict(headers) if headers else None)
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                yield client

        return cls(connect, name=name or url.rsplit("//", 1)[-1].split("/", 1)[0], **options)

    async def __aenter__(self) -> MCPTools:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> list[Tool[..., Any]]:
        """Connect and list the tools; returns them (as ``tools()`` does)."""
        self._lock = asyncio.Lock()
        await self.connection.connect()
        try:
            self._tools = self._build(await self.connection.list_tools())
        except BaseException:
            await self.close()  # a server whose tools are refused does not keep running
            raise
        return self.tools()

    def _build(self, listed: list[Any]) -> list[MCPTool]:
        """The listed tools as ``MCPTool``s; refused (nothing kept) when the options name
        tools the server does not list, or the server lists a name twice."""
        names = [t.name for t in listed]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise MCPServerError(
                f"MCP server {self.name!r} lists the tool {twice[0]!r} more than once"
            )
        for what, given in (
            ("effects", self._effects),
            ("reconcile", self._reconcile),
            ("requires_approval", self._approval),
            ("rename", self._rename),
            ("timeouts", self._timeouts),
        ):
            unknown = sorted(set(given) - set(names))
            if unknown:
                raise UserError(
                    f"MCPTools {self.name!r}: {what} names tools the server does not list: "
                    f"{', '.join(unknown)} (it lists: {', '.join(sorted(names)) or 'none'})"
                )
        return [
            MCPTool(
                t,
                self,
                name=self._rename.get(t.name, t.name),
                effect=self._effects.get(t.name),
                reconcile=self._reconcile.get(t.name),
                requires_approval=self._approval.get(t.name, False),
                timeout=self._timeouts.get(t.name, self.timeout),
                max_result=self.max_result,
            )
            for t in listed
        ]

    def tools(self) -> list[Tool[..., Any]]:
        """The server's tools, as listed at ``start``."""
        if not self._tools and self._lock is None:
            raise UserError(f"MCPTools {self.name!r} is not started: use `async with` or start()")
        return list(self._tools)

    def definitions(self) -> dict[str, Any]:
        """Every tool's definition as listed, with the effect class it got, by the name the
        model sees: what a run records in ``tools_listed``."""
        return {t.name: t.definition for t in self._tools}

    async def recover(self, generation: int) -> None:
        """Make the connection again (a stdio server is restarted), unless another call did
        since ``generation``. ``ServerLost`` when the server cannot be reached."""
        assert self._lock is not None, "start() first"
        async with self._lock:
            if self.connection.generation != generation and self.connection.alive:
                return
            delay = 0.05
            loop = asyncio.get_running_loop()
            until = loop.time() + self.reconnect_within  # each try is bounded (connect_timeout)
            while True:
                try:
                    await self.connection.reconnect()
                    return
                except ServerLost:
                    if loop.time() >= until:
                        raise
                await asyncio.sleep(delay)  # an HTTP server restarting takes a moment
                delay = min(delay * 2, 1.0)

    async def close(self) -> None:
        """Close the connection (a stdio server's process ends)."""
        await self.connection.close()


def _check_seconds(what: str, option: str, value: object) -> None:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise UserError(
            f"{what}: {option} must be a positive, finite number of seconds, not {value!r:.40}"
        )


def python_server(path: str | Path, *args: str, **options: Any) -> MCPTools:
    """``MCPTools.stdio`` of a Python file run by this interpreter."""
    return MCPTools.stdio(sys.executable, [str(path), *args], **options)


__all__ = ["MCPServerError", "MCPTools", "ServerLost", "python_server"]
