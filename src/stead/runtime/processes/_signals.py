"""Run a worker or an executor pool until SIGTERM or SIGINT: the one loop both commands use."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Protocol


class Served(Protocol):
    """A long-running process body: ``Worker`` and ``Pool``."""

    def stop(self) -> None:
        """Begin a graceful stop (a second call cuts the grace period short)."""

    async def run(self) -> None:
        """Work until stopped."""

    async def close(self) -> None:
        """Release what it holds."""


async def until_signalled(served: Served) -> None:
    """Run ``served`` until SIGTERM or SIGINT (each calls its ``stop``: a second one cuts the
    grace period short), then close it."""
    loop = asyncio.get_running_loop()
    stops = (signal.SIGTERM, signal.SIGINT)
    for sig in stops:
        loop.add_signal_handler(sig, served.stop)
    try:
        await served.run()
    finally:
        for sig in stops:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        await served.close()
