"""One live connection to an MCP server, that can be made again when the server goes away.

The ``mcp`` SDK's ``Client`` is an anyio context manager whose task group belongs to the task
that entered it; when the server dies mid-call, that group is torn down and the error can
surface in the caller as a bare ``CancelledError``. A run loop cannot tell that from its own
cancellation, so the client lives in a task of its own (``_serve``) and every call runs in a
task of its own too: what reaches the caller is a result, ``ServerLost``, or ``Aborted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from stead._signal import AbortSignal
from stead.errors import Aborted, SteadError

log = logging.getLogger("stead.mcp")

CANCEL_GRACE = 2.0
"""Seconds a cancelled call gets to send its ``notifications/cancelled`` and wind down."""


MAX_PAGES = 100
"""``tools/list`` pages followed at most: a server whose cursor never ends is refused."""


class MCPServerError(SteadError):
    """An MCP server did something a client cannot go on with: it did not answer in its
    time, its listing loops or does not fit the protocol, a tool's schema cannot be used.
    The message names the server (and the tool)."""


class ServerLost(MCPServerError):
    """The MCP server went away (exited, was killed, dropped the connection) mid-call: the
    call may or may not have happened. Recovered by the tool's effect class."""


class ServerTimedOut(ServerLost):
    """The MCP server did not connect (start, ``initialize``) or answer ``tools/list`` in its
    time. A server that hangs is treated as one that is gone: tried again, then given up."""


class Connection:
    """A ``mcp.Client`` held open in a task of its own; ``reconnect`` makes a new one.

    ``factory`` builds an un-entered ``mcp.Client`` (a stdio one starts the server's process
    when entered, so a reconnect is a restart)."""

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        what: str,
        connect_timeout: float = 30.0,
        list_timeout: float = 30.0,
        max_pages: int = MAX_PAGES,
    ) -> None:
        self._factory = factory
        self.what = what
        self.connect_timeout = connect_timeout
        """Seconds to start (or reach) the server and finish ``initialize``."""
        self.list_timeout = list_timeout
        """Seconds each ``tools/list`` page may take."""
        self.max_pages = max_pages
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._lost: asyncio.Future[None] | None = None
        self._close: asyncio.Event | None = None
        self.generation = 0
        """How many times this connection was made (1 after the first ``connect``)."""

    async def connect(self) -> None:
        """Open the connection (the initialize handshake included); ``ServerLost`` if it
        cannot be made."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._lost = loop.create_future()
        self._close = asyncio.Event()
        task = self._task = loop.create_task(self._serve(ready, self._lost, self._close))
        done, _ = await asyncio.wait({ready}, timeout=self.connect_timeout)
        if not done:
            # A server that never answers initialize: its task is stuck inside the SDK's
            # handshake, where a polite close is never read. Cancelled, not waited on.
            self._task = None
            task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_GRACE)
            raise ServerTimedOut(
                f"{self.what}: did not connect and answer initialize within "
                f"{self.connect_timeout:g}s (connect_timeout)"
            )
        ready.result()
        self.generation += 1

    async def _serve(
        self, ready: asyncio.Future[None], lost: asyncio.Future[None], close: asyncio.Event
    ) -> None:
        try:
            async with self._factory() as client:
                self._client = client
                ready.set_result(None)
                await close.wait()
        except BaseException as exc:  # the SDK's ExceptionGroup of a broken transport, mostly
            if not ready.done():
                ready.set_exception(ServerLost(f"{self.what}: cannot connect: {_text(exc)}"))
            elif not close.is_set():
                log.warning("%s: the connection broke: %s", self.what, _text(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._client = None
            if not lost.done():
                lost.set_result(None)

    @property
    def alive(self) -> bool:
        """Connected, and the connection has not broken."""
        return self._client is not None and self._lost is not None and not self._lost.done()

    async def reconnect(self) -> None:
        """Close what is left of the old connection and make a new one."""
        await self.close()
        await self.connect()

    async def close(self) -> None:
        """Close the connection (a stdio server's process exits with it)."""
        if self._close is not None:
            self._close.set()
        task, self._task = self._task, None
        if task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 5.0)
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def list_tools(self) -> list[Any]:
        """Every tool the server lists, following its pages: each within ``list_timeout``,
        at most ``max_pages`` of them, no cursor twice. ``MCPServerError`` naming the server
        for a listing that does not end or does not fit the protocol."""
        tools: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(self.max_pages):
            try:
                page = await self._request(_lister(cursor), None, within=self.list_timeout)
            except MCPServerError:
                raise
            except Exception as exc:  # the SDK's validation of a malformed answer, mostly
                raise MCPServerError(
                    f"{self.what}: its tools/list answer does not fit the protocol: "
                    f"{_first_line(exc)}"
                ) from exc
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
            if cursor in seen:
                raise MCPServerError(
                    f"{self.what}: tools/list gave the cursor {_short(cursor)} a second time "
                    "(a listing that would never end)"
                )
            seen.add(cursor)
        raise MCPServerError(
            f"{self.what}: tools/list had more than {self.max_pages} pages (max_pages); "
            "a listing that long is refused"
        )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any], signal: AbortSignal
    ) -> Any:
        """``tools/call``; ``Aborted`` when ``signal`` fires first (the SDK then sends
        ``notifications/cancelled``), ``ServerLost`` when the server goes away."""
        return await self._request(lambda c: c.call_tool(name, arguments, meta=meta), signal)

    async def _request(
        self,
        send: Callable[[Any], Any],
        signal: AbortSignal | None,
        *,
        within: float | None = None,
    ) -> Any:
        if not self.alive:
            raise ServerLost(f"{self.what}: not connected")
        assert self._lost is not None
        loop = asyncio.get_running_loop()
        call: asyncio.Task[Any] = loop.create_task(send(self._client))
        aborted: asyncio.Future[str] = loop.create_future()
        if within is not None:
            done, _ = await asyncio.wait(
                {call, self._lost}, timeout=within, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                call.cancel()  # the SDK sends notifications/cancelled
                await asyncio.wait({call}, timeout=CANCEL_GRACE)
                raise ServerTimedOut(
                    f"{self.what}: did not answer tools/list within {within:g}s (list_timeout)"
                )
        if signal is not None:

            def settle(reason: str) -> None:
                if not aborted.done():
                    aborted.set_result(reason)

            signal.add_callback(lambda reason: loop.call_soon_threadsafe(settle, reason))
        lost = self._lost
        try:
            await asyncio.wait({call, aborted, lost}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            raise
        if call.done() and not call.cancelled() and call.exception() is None:
            return call.result()
        if aborted.done() and not call.done():
            call.cancel()  # the SDK's courtesy notifications/cancelled goes out here
            await asyncio.wait({call}, timeout=CANCEL_GRACE)
            raise Aborted(aborted.result())
        if not call.done():
            call.cancel()
            await asyncio.wait({call}, timeout=CANCEL_GRACE)
        error = None if call.cancelled() else call.exception()
        if error is not None and not _is_transport_error(error):
            raise error  # an MCP error the server sent back: it answered
        raise ServerLost(f"{self.what}: the server went away mid-request: {_text(error)}")


def _lister(cursor: str | None) -> Callable[[Any], Any]:
    def send(client: Any) -> Any:
        return client.list_tools(cursor=cursor)

    return send


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return first if len(first) <= 300 else first[:297] + "..."


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _is_transport_error(exc: BaseException) -> bool:
    """A broken connection, not an answer: the SDK's ``Connection closed`` (-32000), or an
    I/O error of the transport."""
    code = getattr(getattr(exc, "error", None), "code", None)
    if code is None:
        code = getattr(exc, "code", None)
    return code == -32000 or isinstance(exc, OSError | EOFError | BaseExceptionGroup)


def _text(exc: BaseException | None) -> str:
    if exc is None:
        return "the connection closed"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_text(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
