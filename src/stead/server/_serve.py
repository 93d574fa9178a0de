"""Run the app under uvicorn, optionally with a worker in the same process.

With ``worker=True`` the app and a ``Worker`` share one ``Runtime``, so the live stream can
show the text a model is streaming (provisional frames exist only in the process driving the
run). Without it, runs are driven by ``stead worker`` processes elsewhere, and the stream
shows their durable events as the store records them.

SIGTERM or SIGINT: the HTTP server stops accepting, the worker stops claiming and hands its
runs back (see ``Worker.stop``), and the store is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Generator, Iterable
from typing import Any

import uvicorn

from stead.runtime import Agent, Runtime, Worker
from stead.server._app import create_app
from stead.server._security import check_bind


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: ``serve`` stops it together with the worker."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


async def serve_http(
    store: str,
    agents: Iterable[Agent],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens: dict[str, str],
    worker: bool = False,
    concurrency: int = 8,
    poll: float = 1.0,
    max_body: int = 64 * 1024,
    heartbeat: float = 15.0,
    ready: Callable[[int], None] | None = None,
    deps: Any = None,
) -> None:
    """Serve until SIGTERM/SIGINT. ``ready(port)`` is called once the socket listens.
    ``deps``: the live objects the worker's tools read (``--deps``); without a worker none
    are needed, also for agents with a ``deps_type`` (nothing here runs a tool)."""
    check_bind(host, tokens)
    agents = list(agents)
    driver = (
        Worker(
            store,
            agents,
            concurrency=concurrency,
            poll_interval=poll,
            deps=deps,
            share_progress=True,
        )
        if worker
        else None
    )
    runtime = driver.runtime if driver is not None else Runtime(store, agents=agents, deps=deps)
    app = create_app(runtime, tokens, max_body=max_body, heartbeat=heartbeat)
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="off", log_level="info", timeout_graceful_shutdown=2
    )
    server = _Server(config)
    loop = asyncio.get_running_loop()

    def stop() -> None:
        server.should_exit = True
        if driver is not None:
            driver.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    tasks = [asyncio.create_task(server.serve())]
    if driver is not None:
        tasks.append(asyncio.create_task(driver.run()))
    try:
        while not server.started:
            if tasks[0].done():
                tasks[0].result()  # the bind failed: say why
                return
            await asyncio.sleep(0.02)
        if ready is not None:
            sockets = [s for srv in server.servers for s in srv.sockets]
            ready(sockets[0].getsockname()[1] if sockets else port)
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            t.result()
    finally:
        stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        await runtime.close()
        logging.getLogger("stead.server").info("stopped")
